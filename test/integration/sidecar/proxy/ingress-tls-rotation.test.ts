/**
 * Certificate rotation on the TLS ingress under load, the way Kubernetes rotates a mounted secret
 * (a new version written beside the old, one rename of the `..data` symlink): streaming Generate
 * calls run throughout, on long-lived connections and on new ones; none fails, new connections
 * get the new certificate, the reload is counted. Then a broken rotation (a garbage certificate):
 * the certificate in use stays, one error is counted, calls go on.
 */
import * as grpc from '@grpc/grpc-js';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { createTestPki, presentedCertificate, secretVolume, type TestPki } from '../../../support/certs.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, generate, tokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

let pki: TestPki;
let engine: RunningEngine;
let sidecar: SidecarProcess;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
  engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 5 });
  cleanups.push(() => engine.close());
});

afterAll(() => runCleanups(cleanups));

const fingerprint = (cert: Buffer): string => new X509Certificate(cert).fingerprint256;

let seq = 0;
const request = (maxTokens: number): Record<string, unknown> => ({
  request_id: `rot-${++seq}`,
  tokenized: { original_text: '', input_ids: tokens(8) },
  sampling_params: { max_tokens: maxTokens, n: 1 },
  stream: true,
});

/** Streaming calls in `lanes` loops until stopped: shared lanes reuse one connection each, fresh lanes open one per call. */
class Load {
  readonly outcomes = new Map<string, number>();
  completed = 0;
  private stopped = false;
  private readonly running: Promise<void>[] = [];

  constructor(address: string, lanes: { shared: number; fresh: number }) {
    const credentials = (): grpc.ChannelCredentials => grpc.credentials.createSsl(pki.ca.cert);
    for (let i = 0; i < lanes.shared; i++) {
      const client = engineClient(address, credentials());
      this.running.push(this.lane(() => client).finally(() => client.close()));
    }
    for (let i = 0; i < lanes.fresh; i++) this.running.push(this.lane(() => engineClient(address, credentials()), true));
  }

  private async lane(client: () => grpc.Client, closeEach = false): Promise<void> {
    // Bounded: at most 400 calls per lane, however long the test waits.
    for (let i = 0; i < 400 && !this.stopped; i++) {
      const c = client();
      const outcome = await generate(c, request(20), { deadline: Date.now() + 10_000 });
      if (closeEach) c.close();
      const key = outcome.code === grpc.status.OK && outcome.messages.length > 0 ? 'OK' : `${grpc.status[outcome.code]}: ${outcome.details}`;
      this.outcomes.set(key, (this.outcomes.get(key) ?? 0) + 1);
      this.completed++;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }
}

describe('certificate rotation on the TLS ingress', () => {
  it('under streaming load: no call fails, new connections present the new certificate, a broken rotation keeps the old one', async () => {
    const volume = secretVolume(pki, 'ingress', pki.server);
    sidecar = await startSidecarProcess([
      '--upstream',
      engine.address,
      '--engine-metrics-url',
      engine.metricsUrl,
      '--tls-cert',
      volume.certFile,
      '--tls-key',
      volume.keyFile,
      '--tls-reload-interval-ms',
      '100',
    ]);
    cleanups.push(() => sidecar.stop('SIGKILL'));
    const reloads = (result: string): Promise<number> => sidecar.metric('dynamo_sidecar_tls_reloads_total', `listener="ingress",result="${result}"`);
    expect(fingerprint(Buffer.from((await presentedCertificate(sidecar.port, pki.ca.cert)).raw))).toBe(fingerprint(pki.server.cert));

    const load = new Load(sidecar.address, { shared: 4, fresh: 2 });
    cleanups.push(() => load.stop());
    // One call long enough (about 2.5 s of tokens) to be streaming across both rotations.
    const long = generate(engineClient(sidecar.address, grpc.credentials.createSsl(pki.ca.cert)), request(500), { deadline: Date.now() + 30_000 });
    await waitFor(() => load.completed >= 20, 'calls to complete before the rotation');

    const next = pki.issue('rotated-server');
    volume.mount(next);
    await waitFor(async () => (await reloads('ok')) === 1, 'the rotation to be taken');
    const presented = await presentedCertificate(sidecar.port, pki.ca.cert);
    expect(fingerprint(presented.raw)).toBe(fingerprint(next.cert));
    expect(presented.serialNumber).toBe(new X509Certificate(next.cert).serialNumber);
    expect(await sidecar.metric('dynamo_sidecar_tls_cert_expiry_timestamp_seconds', 'listener="ingress"')).toBe(
      Math.floor(Date.parse(new X509Certificate(next.cert).validTo) / 1000),
    );
    const afterRotation = load.completed;
    await waitFor(() => load.completed >= afterRotation + 20, 'calls to complete after the rotation');

    // Broken: the certificate file is garbage (a half-written file). The rotated certificate stays.
    volume.mount({ cert: 'garbage', key: next.key });
    await waitFor(async () => (await reloads('error')) === 1, 'the broken rotation to be refused');
    expect(fingerprint((await presentedCertificate(sidecar.port, pki.ca.cert)).raw)).toBe(fingerprint(next.cert));
    const afterBroken = load.completed;
    await waitFor(() => load.completed >= afterBroken + 20, 'calls to complete after the broken rotation');

    await load.stop();
    const longOutcome = await long;
    expect(longOutcome.code).toBe(grpc.status.OK);
    expect(load.outcomes).toEqual(new Map([['OK', load.completed]]));
    expect(await reloads('ok')).toBe(1);
    expect(await reloads('error')).toBe(1);
    const warnings = sidecar
      .stderr()
      .split('\n')
      .filter((line) => line.includes('TLS certificate files changed but cannot be used'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`"reason":"\\"${volume.certFile}\\": no PEM certificate in it`);
  });
});
