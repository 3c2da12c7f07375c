/**
 * TLS on every hop, in one process (the composition roots as the commands build them): an HTTPS
 * client with a certificate -> frontend (HTTPS with mTLS, and its admin listener) -> sidecar
 * (ingress with mTLS, system port over HTTPS) -> engine behind TLS with mTLS. One chat completion
 * crosses all of them; the admin listener asks for the client certificate too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { startFrontend, type RunningFrontend } from '../../../src/frontend/frontend.js';
import { parseSidecarConfig } from '../../../src/sidecar/config/sidecar-config.js';
import { startSidecar, type RunningSidecar } from '../../../src/sidecar/sidecar.js';
import { startSimulatedEngine, type RunningEngine } from '../../../src/tools/engine/index.js';
import { createTestPki, httpsGet, type TestPki } from '../../support/certs.js';
import { runCleanups } from '../../support/cleanups.js';
import { httpsFetch } from '../../support/https-fetch.js';
import { recordingLogger, type RecordingLogger } from '../../support/recording-logger.js';
import { startTlsTerminator } from '../../support/tls-terminator.js';
import { waitFor } from '../../support/wait.js';

let pki: TestPki;
let engine: RunningEngine;
let sidecar: RunningSidecar;
let frontend: RunningFrontend;
let sidecarLog: RecordingLogger;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
  engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 5 });
  cleanups.push(() => engine.close());
  const front = await startTlsTerminator(engine.address, { cert: pki.server.cert, key: pki.server.key, clientCa: pki.ca.cert });
  cleanups.push(() => front.close());
  const tlsPair = { certFile: pki.server.certFile, keyFile: pki.server.keyFile };
  sidecarLog = recordingLogger();
  sidecar = await startSidecar(
    parseSidecarConfig(
      {
        listen: '127.0.0.1:0',
        systemHost: '127.0.0.1',
        systemPort: '0',
        upstream: front.address,
        engineLoadSource: 'getloads',
        tlsCert: tlsPair.certFile,
        tlsKey: tlsPair.keyFile,
        tlsClientCa: pki.ca.certFile,
        systemTlsCert: tlsPair.certFile,
        systemTlsKey: tlsPair.keyFile,
        upstreamTls: true,
        upstreamCa: pki.ca.certFile,
        upstreamCert: pki.client.certFile,
        upstreamKey: pki.client.keyFile,
        upstreamServerName: 'localhost',
        tlsReloadIntervalMs: '50',
      },
      {},
    ),
    { logger: sidecarLog },
  );
  cleanups.push(() => sidecar.close());
  frontend = await startFrontend(
    parseFrontendConfig(
      {
        httpHost: '127.0.0.1',
        httpPort: '0',
        adminAddress: '127.0.0.1:0',
        workers: [`127.0.0.1:${sidecar.ingressPort}`],
        tlsCert: tlsPair.certFile,
        tlsKey: tlsPair.keyFile,
        tlsClientCa: pki.ca.certFile,
        workerTls: true,
        workerCa: pki.ca.certFile,
        workerCert: pki.client.certFile,
        workerKey: pki.client.keyFile,
        workerServerName: 'localhost',
        tlsReloadIntervalMs: '50',
      },
      {},
    ),
    { logger: recordingLogger() },
  );
  cleanups.push(() => frontend.close());
  await waitFor(() => frontend.router.ready(), 'the worker pushed over TLS');
});

afterAll(() => runCleanups(cleanups));

describe('TLS on every hop, in process', () => {
  it('a chat completion crosses HTTPS, the mTLS ingress and the TLS engine connection', async () => {
    const tls = { ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key };
    const res = await httpsFetch(tls)(`https://127.0.0.1:${frontend.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: engine.options.modelName, messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]!.message.content.trim().split(' ')).toHaveLength(3);
    expect((await httpsGet(`https://127.0.0.1:${sidecar.systemPort}/ready`, { ca: pki.ca.cert })).status).toBe(200);
    expect(sidecarLog.find('TLS on', 'info').map((l) => l.fields['listener'])).toEqual(['ingress', 'system']);
    expect(sidecarLog.find('TLS to', 'info').map((l) => l.fields['listener'])).toEqual(['upstream-client']);
  });

  it('the admin listener serves over the same TLS and asks for the client certificate too', async () => {
    const admin = `https://127.0.0.1:${frontend.adminPort}/busy_threshold`;
    expect((await httpsGet(admin, { ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key })).status).toBe(200);
    await expect(httpsGet(admin, { ca: pki.ca.cert })).rejects.toThrow();
  });
});
