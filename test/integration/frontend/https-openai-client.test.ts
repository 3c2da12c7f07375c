/**
 * TLS on both sides of the frontend, with real processes: the official `openai` client over
 * HTTPS (HTTP/1.1) to a frontend with --tls-cert, which reaches its worker's sidecar over TLS
 * with a client certificate (--worker-tls; the sidecar requires mTLS) for Generate calls and the
 * WorkerLoad pushes. With --tls-client-ca the frontend refuses clients without a certificate.
 * A rotated worker client certificate reaches new calls while a stream in progress finishes.
 */
import { X509Certificate } from 'node:crypto';
import OpenAI, { APIConnectionError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, httpsGet, secretVolume, type SecretVolume, type TestPki } from '../../support/certs.js';
import { runCleanups } from '../../support/cleanups.js';
import { httpsFetch } from '../../support/https-fetch.js';
import { parseMetric, SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

let pki: TestPki;
let sys: SystemUnderTest;
let worker: Worker;
let workerVolume: SecretVolume;
let frontend: FrontendProcess;
let base: string;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
  sys = new SystemUnderTest();
  cleanups.push(() => sys.stopAll());
  worker = await sys.worker({
    engine: ['--decode-step-ms', '10'],
    sidecar: ['--tls-cert', pki.server.certFile, '--tls-key', pki.server.keyFile, '--tls-client-ca', pki.ca.certFile],
  });
  workerVolume = secretVolume(pki, 'worker-client', pki.client);
  frontend = await sys.frontend([
    '--worker',
    worker.sidecar.address,
    '--tls-cert',
    pki.server.certFile,
    '--tls-key',
    pki.server.keyFile,
    '--worker-tls',
    '--worker-ca',
    pki.ca.certFile,
    '--worker-cert',
    workerVolume.certFile,
    '--worker-key',
    workerVolume.keyFile,
    '--tls-reload-interval-ms',
    '100',
    '--overload-lease-ms',
    '50',
  ]);
  base = `https://127.0.0.1:${frontend.port}`;
  await waitFor(async () => (await httpsGet(`${base}/ready`, { ca: pki.ca.cert })).status === 200, 'the worker pushed over TLS');
});

afterAll(() => runCleanups(cleanups));

function openai(tls: { cert?: Buffer; key?: Buffer } = {}, url = base): OpenAI {
  return new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 20_000, fetch: httpsFetch({ ca: pki.ca.cert, ...tls }) });
}

const model = (): string => worker.engine.model;

describe('the openai client over HTTPS, the frontend over TLS to its worker', () => {
  it('lists the model, gets a chat completion and streams one', async () => {
    const client = openai();
    expect((await client.models.list()).data.map((m) => m.id)).toEqual([model()]);
    const res = await client.chat.completions.create({ model: model(), messages: [{ role: 'user', content: 'tell me a story' }], max_tokens: 5 });
    expect(res.choices[0]!.message.content!.trim().split(' ')).toHaveLength(5);
    const stream = await client.chat.completions.create({ model: model(), messages: [{ role: 'user', content: 'count' }], max_tokens: 8, stream: true });
    let chunks = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) chunks++;
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(chunks).toBe(8);
    expect(finish).toBe('length');
  });

  it('serves nothing over plain HTTP, and exports the expiry of both certificates it presents', async () => {
    await expect(fetch(`http://127.0.0.1:${frontend.port}/v1/models`, { signal: AbortSignal.timeout(5000) })).rejects.toThrow();
    const metrics = (await httpsGet(`${base}/metrics`, { ca: pki.ca.cert })).body;
    const notAfter = (cert: Buffer): number => Math.floor(Date.parse(new X509Certificate(cert).validTo) / 1000);
    expect(parseMetric(metrics, 'dynamo_frontend_tls_cert_expiry_timestamp_seconds', { listener: 'http' })).toBe(notAfter(pki.server.cert));
    expect(parseMetric(metrics, 'dynamo_frontend_tls_cert_expiry_timestamp_seconds', { listener: 'worker-client' })).toBe(notAfter(pki.client.cert));
  });

  it('with --tls-client-ca, refuses a client without a certificate and serves one with', async () => {
    const mtls = await sys.frontend([
      '--worker',
      worker.sidecar.address,
      '--tls-cert',
      pki.server.certFile,
      '--tls-key',
      pki.server.keyFile,
      '--tls-client-ca',
      pki.ca.certFile,
      '--worker-tls',
      '--worker-ca',
      pki.ca.certFile,
      '--worker-cert',
      pki.client.certFile,
      '--worker-key',
      pki.client.keyFile,
    ]);
    const url = `https://127.0.0.1:${mtls.port}`;
    const withCert = openai({ cert: pki.client.cert, key: pki.client.key }, url);
    await waitFor(
      async () => (await httpsGet(`${url}/ready`, { ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key })).status === 200,
      'the mTLS frontend ready',
    );
    expect((await withCert.models.list()).data).toHaveLength(1);
    await expect(openai({}, url).models.list()).rejects.toBeInstanceOf(APIConnectionError);
  });

  it('a rotated worker client certificate reaches new calls; a stream in progress finishes', async () => {
    const client = openai();
    const reloads = async (): Promise<number> =>
      parseMetric((await httpsGet(`${base}/metrics`, { ca: pki.ca.cert })).body, 'dynamo_frontend_tls_reloads_total', {
        listener: 'worker-client',
        result: 'ok',
      });
    // About 2 s of tokens (200 steps of 10 ms), streaming across both rotations: started before them.
    const stream = await client.chat.completions.create({ model: model(), messages: [{ role: 'user', content: 'long' }], max_tokens: 200, stream: true });
    let chunks = 0;
    let finish: string | null = null;
    const long = (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) chunks++;
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { chunks, finish };
    })();
    await waitFor(() => chunks > 0, 'the long stream to start');

    // A client certificate the sidecar does not trust: new calls go over a new connection with it and fail.
    workerVolume.mount(pki.issue('untrusted-worker-client', { signer: 'otherCa', usage: 'client' }));
    await waitFor(async () => (await reloads()) === 1, 'the frontend to reload the worker client certificate');
    const refused = await client.chat.completions.create({ model: model(), messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }).then(
      () => 200,
      (err: { status?: number }) => err.status,
    );
    expect(refused).toBe(503);

    // A trusted one again: new calls go through, and the long stream never noticed.
    workerVolume.mount(pki.issue('renewed-worker-client', { usage: 'client' }));
    await waitFor(async () => (await reloads()) === 2, 'the second reload');
    await waitFor(
      async () =>
        await client.chat.completions.create({ model: model(), messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }).then(
          () => true,
          () => false,
        ),
      'a new call to go through with the renewed certificate',
    );
    expect(await long).toEqual({ chunks: 200, finish: 'length' });
  });
});
