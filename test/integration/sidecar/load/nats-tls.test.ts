/**
 * NATS over TLS with a client certificate (nats-server --tlsverify) and a token from
 * NATS_AUTH_TOKEN, end to end with real processes: the sidecar publishes its load events and the
 * frontend reads them (the worker shows up and the frontend is ready), and the token appears in
 * neither's output even at debug level. A wrong token is refused by the broker and reported
 * without the token.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { createTestPki, type TestPki } from '../../../support/certs.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startNatsServer, type NatsServerHandle } from '../../../support/nats-server.js';
import { startSidecarProcess } from '../../../support/sidecar-process.js';
import { SystemUnderTest } from '../../../support/system-processes.js';
import { startTestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

const TOKEN = 'tok-9f3a71c2e5d84b06';
const SUBJECT = 'namespace.dynamo.component.backend.endpoint.generate.kv_metrics';

let pki: TestPki;
let nats: NatsServerHandle;
let sub: NatsConnection;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
  nats = await startNatsServer({
    args: ['--tlsverify', '--tlscert', pki.server.certFile, '--tlskey', pki.server.keyFile, '--tlscacert', pki.ca.certFile, '--auth', TOKEN],
  });
  cleanups.push(() => nats.stop());
  sub = await connect({ servers: nats.url, token: TOKEN, tls: { caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile } });
  cleanups.push(() => sub.close());
});

afterAll(() => runCleanups(cleanups));

/** The NATS server, its CA and the client certificate it requires. */
const natsArgs = (): string[] => [
  '--nats-url',
  nats.url,
  '--nats-tls-ca',
  pki.ca.certFile,
  '--nats-tls-cert',
  pki.client.certFile,
  '--nats-tls-key',
  pki.client.keyFile,
];

describe('NATS over TLS with a token', () => {
  it('the sidecar publishes and the frontend reads; the token is in no output', async () => {
    const got: LoadEvent[] = [];
    sub.subscribe(SUBJECT, { callback: (_err, msg) => void got.push(msg.json<LoadEvent>()) });
    await sub.flush();
    const engine = await startTestEngine();
    cleanups.push(() => engine.close());
    const sidecar = await startSidecarProcess(
      [
        '--upstream',
        engine.address,
        '--engine-load-source',
        'traffic',
        '--load-heartbeat-ms',
        '100',
        '--log-level',
        'debug',
        '--worker-id',
        '77',
        '--served-model-name',
        'm',
        ...natsArgs(),
      ],
      { NATS_AUTH_TOKEN: TOKEN },
    );
    cleanups.push(() => sidecar.stop('SIGKILL'));
    await waitFor(() => got.some((e) => e.worker_id === 77), 'a load event over TLS');
    expect(await sidecar.metric('dynamo_sidecar_nats_connected')).toBe(1);

    const sys = new SystemUnderTest();
    cleanups.push(() => sys.stopAll());
    const frontend = await sys.frontend(['--load-heartbeat-ms', '100', '--log-level', 'debug', ...natsArgs()], { NATS_AUTH_TOKEN: TOKEN });
    await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to learn the worker over NATS');
    expect(await frontend.metric('dynamo_frontend_load_source_connected', { source: 'nats' })).toBe(1);

    expect(sidecar.stderr()).toContain('"msg":"NATS connected"');
    for (const output of [sidecar.stderr(), sidecar.stdout(), frontend.stderr(), frontend.stdout()]) expect(output).not.toContain(TOKEN);
  });

  it('a wrong token is refused and reported without the token', async () => {
    const wrong = 'wrong-4c1d9e7b2a';
    const engine = await startTestEngine();
    cleanups.push(() => engine.close());
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-load-source', 'traffic', '--log-level', 'debug', ...natsArgs()], {
      NATS_AUTH_TOKEN: wrong,
    });
    cleanups.push(() => sidecar.stop('SIGKILL'));
    await waitFor(() => sidecar.stderr().includes('NATS not reachable'), 'the refusal to be logged');
    const line = sidecar
      .stderr()
      .split('\n')
      .find((l) => l.includes('NATS not reachable'))!;
    expect(line).toMatch(/authorization violation/i);
    expect(line).toContain('"nats_auth":"token"');
    expect(await sidecar.metric('dynamo_sidecar_nats_connected')).toBe(0);
    expect(sidecar.stderr() + sidecar.stdout()).not.toContain(wrong);
  });
});
