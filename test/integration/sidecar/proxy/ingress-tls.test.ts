/**
 * The gRPC ingress over TLS, through the real sidecar process to the simulated vLLM engine: a
 * grpc-js client trusting the CA gets its Generate streams; h2c, HTTP/1.1-only ALPN and an
 * untrusted certificate are refused. With a client CA (mTLS), a client with a certificate from
 * that CA is served and one without (or from another CA) fails its handshake: nothing reaches
 * the engine, the sidecar counts the failed handshakes.
 */
import * as grpc from '@grpc/grpc-js';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { createTestPki, presentedCertificate, type TestPki } from '../../../support/certs.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, generate, tokens } from '../../../support/vllm-client.js';

let pki: TestPki;
let engine: RunningEngine;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
  engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 5 });
  cleanups.push(() => engine.close());
});

afterAll(() => runCleanups(cleanups));

async function sidecar(args: string[]): Promise<SidecarProcess> {
  const s = await startSidecarProcess(['--upstream', engine.address, '--engine-metrics-url', engine.metricsUrl, ...args]);
  cleanups.push(() => s.stop('SIGKILL'));
  return s;
}

function client(address: string, credentials: grpc.ChannelCredentials): grpc.Client {
  const c = engineClient(address, credentials);
  cleanups.push(() => c.close());
  return c;
}

let seq = 0;
const request = (maxTokens: number): Record<string, unknown> => ({
  request_id: `tls-${++seq}`,
  tokenized: { original_text: '', input_ids: tokens(8) },
  sampling_params: { max_tokens: maxTokens, n: 1 },
  stream: true,
});
const deadline = (): grpc.CallOptions => ({ deadline: Date.now() + 10_000 });

/** The ALPN protocol a TLS handshake offering only `protocols` ends with, or the handshake error. */
function handshake(port: number, protocols: string[]): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ca: pki.ca.cert, ALPNProtocols: protocols }, () => {
      resolve(`connected ${String(socket.alpnProtocol)}`);
      socket.destroy();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code ?? err.message}`));
  });
}

describe('TLS ingress', () => {
  let s: SidecarProcess;

  beforeAll(async () => {
    s = await sidecar(['--tls-cert', pki.server.certFile, '--tls-key', pki.server.keyFile]);
  });

  it('serves Generate streams to a grpc-js client that trusts the CA, presenting the configured certificate', async () => {
    const c = client(s.address, grpc.credentials.createSsl(pki.ca.cert));
    const outcomes = await Promise.all([1, 2, 3].map(() => generate(c, request(6), deadline())));
    for (const outcome of outcomes) {
      expect(outcome.code).toBe(grpc.status.OK);
      expect(outcome.messages.length).toBeGreaterThan(0);
    }
    const peer = await presentedCertificate(s.port, pki.ca.cert);
    expect(peer.fingerprint256).toBe(new (await import('node:crypto')).X509Certificate(pki.server.cert).fingerprint256);
    expect(await s.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')).toBe(3);
  });

  it('speaks only h2: an HTTP/1.1-only ALPN offer fails the handshake', async () => {
    expect(await handshake(s.port, ['h2'])).toBe('connected h2');
    expect(await handshake(s.port, ['http/1.1'])).toMatch(/^error ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL/);
  });

  it('refuses an h2c client and a client that does not trust the certificate', async () => {
    const plain = await generate(client(s.address, grpc.credentials.createInsecure()), request(2), deadline());
    expect(plain.code).toBe(grpc.status.UNAVAILABLE);
    const untrusting = await generate(client(s.address, grpc.credentials.createSsl(pki.otherCa.cert)), request(2), deadline());
    expect(untrusting.code).toBe(grpc.status.UNAVAILABLE);
    expect(untrusting.details).toMatch(/certificate|verify/i);
  });
});

describe('mTLS ingress (--tls-client-ca)', () => {
  let s: SidecarProcess;

  beforeAll(async () => {
    s = await sidecar(['--tls-cert', pki.server.certFile, '--tls-key', pki.server.keyFile, '--tls-client-ca', pki.ca.certFile]);
  });

  it('serves a client that presents a certificate signed by the client CA', async () => {
    const c = client(s.address, grpc.credentials.createSsl(pki.ca.cert, pki.client.key, pki.client.cert));
    const outcome = await generate(c, request(4), deadline());
    expect(outcome.code).toBe(grpc.status.OK);
    expect(outcome.messages.length).toBeGreaterThan(0);
  });

  it.each([
    ['no client certificate', () => grpc.credentials.createSsl(pki.ca.cert)],
    ['a client certificate from another CA', () => grpc.credentials.createSsl(pki.ca.cert, pki.otherServer.key, pki.otherServer.cert)],
  ])('refuses a client with %s at the handshake: no call reaches the engine', async (_name, credentials) => {
    const tokensBefore = engine.stats().generatedTokens;
    const callsBefore = await s.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"');
    const failuresBefore = await s.metric('dynamo_sidecar_tls_handshake_failures_total', 'listener="ingress"');
    const outcome = await generate(client(s.address, credentials()), request(4), deadline());
    expect(outcome.code).toBe(grpc.status.UNAVAILABLE);
    expect(outcome.messages).toEqual([]);
    expect(engine.stats().generatedTokens).toBe(tokensBefore);
    expect(await s.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')).toBe(callsBefore);
    expect(await s.metric('dynamo_sidecar_tls_handshake_failures_total', 'listener="ingress"')).toBeGreaterThan(failuresBefore);
  });
});
