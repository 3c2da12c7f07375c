/**
 * The sidecar in front of a grpcio engine (grpc-core, as Python engines serve gRPC) with the
 * server's default keepalive policy: no PING without calls, at most one every 5 minutes with
 * them, GOAWAY ENHANCE_YOUR_CALM "too_many_pings" after two strikes. Idle, the sidecar must still
 * know the engine is there without being told to calm down; then under load, no call may fail.
 */
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { GRPCIO_ECHO_PATH, startGrpcioEngine } from '../../../support/grpcio-engine.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { waitFor } from '../../../support/wait.js';

// grpc-core's idle policy strikes every PING after the first, and sends GOAWAY on the third
// strike: with a PING a second that is 4 s, so this spans three such GOAWAYs.
const IDLE_MS = 15_000;
const LOAD_CALLS = 400;
const CONCURRENCY = 8;

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One unary Echo through the sidecar: its grpc-status, and whether the bytes came back. */
function echo(session: ClientHttp2Session, payload: Buffer): Promise<{ status: string | undefined; echoed: boolean }> {
  return new Promise((resolve) => {
    const stream = session.request({ ':method': 'POST', ':path': GRPCIO_ECHO_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    stream.on('response', (headers) => (status ??= headers['grpc-status'] as string | undefined));
    stream.on('trailers', (trailers: IncomingHttpHeaders) => (status = trailers['grpc-status'] as string | undefined));
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('close', () => resolve({ status, echoed: Buffer.concat(chunks).equals(frameMessage(payload)) }));
    stream.on('error', () => {});
    stream.end(frameMessage(payload));
  });
}

function closedConnections(sidecar: SidecarProcess): string[] {
  return sidecar
    .stderr()
    .split('\n')
    .filter((line) => line.includes('engine connection closed') || line.includes('upstream unreachable'));
}

describe('a grpcio engine with its default keepalive policy', () => {
  it('stays on one connection while idle and under load, reads reachable throughout, and fails no call', async () => {
    const engine = await startGrpcioEngine();
    cleanups.push(() => engine.stop());
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-load-source', 'traffic']);
    cleanups.push(() => sidecar.stop());
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'the sidecar to be ready');

    // A deliberate idle period, the time a PING-happy client needs to be sent away three times.
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    expect(closedConnections(sidecar)).toEqual([]);
    expect((await sidecar.get('/ready')).status).toBe(200);

    const client = connect(`http://${sidecar.address}`);
    client.on('error', () => {});
    cleanups.push(() => void client.destroy());
    const outcomes: { status: string | undefined; echoed: boolean }[] = [];
    let sent = 0;
    const worker = async (): Promise<void> => {
      while (sent < LOAD_CALLS) outcomes.push(await echo(client, Buffer.from(`call ${sent++}`)));
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    expect(outcomes.filter((o) => o.status !== '0' || !o.echoed)).toEqual([]);
    expect(outcomes).toHaveLength(LOAD_CALLS);
    expect(closedConnections(sidecar)).toEqual([]);
    expect(await sidecar.metrics()).not.toMatch(/^dynamo_sidecar_upstream_errors_total\{[^}]*\} [1-9]/m);
  });
});
