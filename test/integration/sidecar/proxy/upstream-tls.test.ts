/**
 * The sidecar's engine connection over TLS (--upstream-tls), against the simulated vLLM engine
 * behind a TLS front (ALPN h2, like an engine serving gRPC over TLS): calls go through with the
 * right CA and name, and with a client certificate when the engine asks for one. A handshake
 * that fails (untrusted CA, wrong name, expired certificate, no client certificate) makes the
 * engine unreachable with the reason in /ready and the log, and calls fail fast with UNAVAILABLE.
 * A rotated client certificate reaches new calls while a call in progress finishes on its own
 * connection.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { createTestPki, secretVolume, type TestPki } from '../../../support/certs.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTlsTerminator, type TlsTerminator } from '../../../support/tls-terminator.js';
import { engineClient, generate, startGenerate, tokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

let pki: TestPki;
let engine: RunningEngine;
let front: TlsTerminator;
let mtlsFront: TlsTerminator;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
  engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 10 });
  cleanups.push(() => engine.close());
  front = await startTlsTerminator(engine.address, { cert: pki.server.cert, key: pki.server.key });
  cleanups.push(() => front.close());
  mtlsFront = await startTlsTerminator(engine.address, { cert: pki.server.cert, key: pki.server.key, clientCa: pki.ca.cert });
  cleanups.push(() => mtlsFront.close());
});

afterAll(() => runCleanups(cleanups));

async function sidecar(upstream: string, args: string[]): Promise<SidecarProcess> {
  // GetLoads over the engine connection: the KV source needs no second (plaintext) way to the engine.
  const s = await startSidecarProcess(['--upstream', upstream, '--engine-load-source', 'getloads', '--upstream-tls', ...args]);
  cleanups.push(() => s.stop('SIGKILL'));
  return s;
}

function client(address: string): grpc.Client {
  const c = engineClient(address);
  cleanups.push(() => c.close());
  return c;
}

let seq = 0;
const request = (maxTokens: number): Record<string, unknown> => ({
  request_id: `up-tls-${++seq}`,
  tokenized: { original_text: '', input_ids: tokens(8) },
  sampling_params: { max_tokens: maxTokens, n: 1 },
  stream: true,
});
const deadline = (): grpc.CallOptions => ({ deadline: Date.now() + 15_000 });

async function ready(s: SidecarProcess): Promise<{ status: number; reason: string }> {
  const { status, body } = await s.get('/ready');
  return { status, reason: (JSON.parse(body) as { reason?: string }).reason ?? '' };
}

describe('engine connection over TLS', () => {
  it('carries calls to an engine whose certificate chains to --upstream-ca, verified as --upstream-server-name', async () => {
    const s = await sidecar(front.address, ['--upstream-ca', pki.ca.certFile, '--upstream-server-name', 'localhost']);
    await waitFor(async () => (await ready(s)).status === 200, 'the engine to be reachable over TLS');
    const outcome = await generate(client(s.address), request(5), deadline());
    expect(outcome.code).toBe(grpc.status.OK);
    expect(outcome.messages.length).toBeGreaterThan(0);
    expect(await s.metric('dynamo_sidecar_tls_handshake_failures_total', 'listener="upstream-client"')).toBe(0);
  });

  it('presents --upstream-cert to an engine that verifies clients (mTLS), and exports its expiry', async () => {
    const s = await sidecar(mtlsFront.address, [
      '--upstream-ca',
      pki.ca.certFile,
      '--upstream-cert',
      pki.client.certFile,
      '--upstream-key',
      pki.client.keyFile,
    ]);
    await waitFor(async () => (await ready(s)).status === 200, 'the engine to accept the client certificate');
    expect((await generate(client(s.address), request(3), deadline())).code).toBe(grpc.status.OK);
    const notAfter = Math.floor(Date.parse(new (await import('node:crypto')).X509Certificate(pki.client.cert).validTo) / 1000);
    expect(await s.metric('dynamo_sidecar_tls_cert_expiry_timestamp_seconds', 'listener="upstream-client"')).toBe(notAfter);
  });

  it.each<[string, () => [string, string[]], RegExp]>([
    ['a CA that did not sign the engine certificate', () => [front.address, ['--upstream-ca', pki.otherCa.certFile]], /UNABLE_TO_VERIFY_LEAF_SIGNATURE/],
    [
      'a server name the engine certificate does not carry',
      () => [front.address, ['--upstream-ca', pki.ca.certFile, '--upstream-server-name', 'engine.example']],
      /ERR_TLS_CERT_ALTNAME_INVALID .*engine\.example/,
    ],
    [
      'no client certificate for an engine that requires one',
      () => [mtlsFront.address, ['--upstream-ca', pki.ca.certFile]],
      // TLS 1.3: the refusal comes after the client's side of the handshake; its alert may be lost with the connection.
      /(?:ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED|the engine closed the connection right after it)/,
    ],
  ])('reads the engine unreachable, with the reason in /ready and the log, given %s', async (_name, setup, code) => {
    const [upstream, args] = setup();
    const s = await sidecar(upstream, args);
    let last = { status: 0, reason: '' };
    await waitFor(async () => (last = await ready(s)).reason.includes('TLS handshake'), 'the handshake failure to show in /ready');
    expect(last.status).toBe(503);
    expect(last.reason).toMatch(new RegExp(`^upstream ${upstream} unreachable: TLS handshake with the engine failed: ${code.source}`));
    const outcome = await generate(client(s.address), request(3), deadline());
    expect(outcome.code).toBe(grpc.status.UNAVAILABLE);
    expect(outcome.details).toBe('engine unavailable');
    const logged = s
      .stderr()
      .split('\n')
      .filter((line) => line.includes('"upstream unreachable"'));
    expect(logged.length).toBeGreaterThanOrEqual(1);
    expect(logged[0]).toMatch(code);
    expect(await s.metric('dynamo_sidecar_tls_handshake_failures_total', 'listener="upstream-client"')).toBeGreaterThan(0);
  });

  it('reads an engine presenting an expired certificate unreachable, saying so', async () => {
    const expiredFront = await startTlsTerminator(engine.address, { cert: pki.expiredServer.cert, key: pki.expiredServer.key });
    cleanups.push(() => expiredFront.close());
    const s = await sidecar(expiredFront.address, ['--upstream-ca', pki.ca.certFile]);
    await waitFor(async () => (await ready(s)).reason.includes('CERT_HAS_EXPIRED'), 'the expired certificate to show in /ready');
  });

  it('a rotated client certificate reaches new calls while the call in progress finishes on its connection', async () => {
    const volume = secretVolume(pki, 'upstream-client', pki.client);
    const s = await sidecar(mtlsFront.address, [
      '--upstream-ca',
      pki.ca.certFile,
      '--upstream-cert',
      volume.certFile,
      '--upstream-key',
      volume.keyFile,
      '--tls-reload-interval-ms',
      '50',
    ]);
    await waitFor(async () => (await ready(s)).status === 200, 'the engine to be reachable');
    const c = client(s.address);
    // About 2 s of tokens (200 steps of 10 ms): in progress through both rotations below.
    const long = startGenerate(c, request(200), deadline());
    let longTokens = 0;
    long.on('data', () => longTokens++);
    const longStatus = new Promise<grpc.StatusObject>((resolve) => long.on('status', resolve));
    long.on('error', () => {});
    await waitFor(() => longTokens > 0, 'the long call to stream');

    // A client certificate the engine does not trust: the next call opens a new connection with it and is refused.
    const untrusted = pki.issue('untrusted-client', { signer: 'otherCa', usage: 'client' });
    volume.mount(untrusted);
    await waitFor(async () => (await s.metric('dynamo_sidecar_tls_reloads_total', 'listener="upstream-client",result="ok"')) === 1, 'the reload');
    expect((await generate(c, request(2), deadline())).code).toBe(grpc.status.UNAVAILABLE);
    await waitFor(async () => (await ready(s)).reason.includes('TLS handshake'), 'the refused handshake to show in /ready');

    // A good one again: new connections are accepted, and the long call never noticed.
    const renewed = pki.issue('renewed-client', { usage: 'client' });
    volume.mount(renewed);
    await waitFor(async () => (await ready(s)).status === 200, 'the engine to be reachable with the renewed certificate');
    expect((await generate(c, request(2), deadline())).code).toBe(grpc.status.OK);
    const status = await longStatus;
    expect(status.code).toBe(grpc.status.OK);
    expect(longTokens).toBeGreaterThan(100);
    expect(await s.metric('dynamo_sidecar_tls_reloads_total', 'listener="upstream-client",result="ok"')).toBe(2);
    expect(s.stderr()).toContain('engine connection renewed: the TLS files changed');
  });
});
