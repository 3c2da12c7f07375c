/**
 * Engine liveness as UpstreamPool sees it, against the test engine in its own process: a
 * SIGSTOPped engine reads unreachable within pingTimeout + pingInterval and keeps its calls, a
 * killed one reads unreachable at once, and a restarted one reachable again; each change logged once.
 */
import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import {
  DEFAULT_UPSTREAM_PING_INTERVAL_MS as DEFAULT_PING_INTERVAL_MS,
  DEFAULT_UPSTREAM_PING_TIMEOUT_MS as DEFAULT_PING_TIMEOUT_MS,
} from '../../../../src/sidecar/config/sidecar-config.js';
import { UpstreamPool } from '../../../../src/sidecar/proxy/upstream.js';
import { startEngineProcess, type EngineProcess } from '../../../support/engine-process.js';
import { TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

// Timers on a loaded 2-core machine fire late; the bound under test is pingTimeout + pingInterval.
const SLACK_MS = 3_000;

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function engineProcess(port?: number): Promise<EngineProcess> {
  const engine = await startEngineProcess(port);
  cleanups.push(() => engine.kill());
  return engine;
}

function upstreamFor(engine: EngineProcess): { pool: UpstreamPool; log: RecordingLogger } {
  const log = recordingLogger();
  const pool = new UpstreamPool({ target: { host: '127.0.0.1', port: engine.port } }, log);
  cleanups.push(() => pool.close());
  return { pool, log };
}

function stateLog(log: RecordingLogger): string[] {
  return log.lines.filter((line) => line.msg === 'upstream reachable' || line.msg === 'upstream unreachable').map((line) => line.msg);
}

/** A Hold call (answered only when the engine is told "release"), with its outcome recorded. */
function holdCall(pool: UpstreamPool): { stream: ClientHttp2Stream; trailers: () => IncomingHttpHeaders | undefined } {
  const stream = pool.request({ ':method': 'POST', ':path': `${TEST_ENGINE_PATH}/Hold`, 'content-type': 'application/grpc', te: 'trailers' });
  let trailers: IncomingHttpHeaders | undefined;
  stream.on('trailers', (received: IncomingHttpHeaders) => (trailers = received));
  stream.on('error', () => {});
  stream.resume();
  // An empty EchoRequest: zero bytes of protobuf.
  stream.end(frameMessage(new Uint8Array(0)));
  return { stream, trailers: () => trailers };
}

describe('engine liveness', () => {
  it('reads a SIGSTOPped engine unreachable within pingTimeout + pingInterval, keeps its call, and reachable again on SIGCONT', async () => {
    const engine = await engineProcess();
    const { pool, log } = upstreamFor(engine);
    pool.start();
    await waitFor(() => pool.reachable, 'the engine to be reachable', 15_000);
    const held = holdCall(pool);

    engine.proc.kill('SIGSTOP');
    cleanups.push(() => void engine.proc.kill('SIGCONT'));
    const stoppedAt = performance.now();
    await waitFor(() => !pool.reachable, 'the stopped engine to read unreachable', 30_000);
    const detectedMs = performance.now() - stoppedAt;
    expect(detectedMs).toBeLessThan(DEFAULT_PING_TIMEOUT_MS + DEFAULT_PING_INTERVAL_MS + SLACK_MS);
    expect(pool.unreachableReason).toBe(`upstream ${engine.address} unreachable: engine did not answer PING within ${DEFAULT_PING_TIMEOUT_MS} ms`);

    engine.proc.kill('SIGCONT');
    await waitFor(() => pool.reachable, 'the resumed engine to read reachable', 15_000);
    expect(held.stream.destroyed).toBe(false);
    // The Hold call may reach the handler only now; ask again until it is released.
    await waitFor(
      () => {
        engine.proc.stdin.write('release\n');
        return held.trailers() !== undefined;
      },
      'the held call to complete',
      15_000,
      200,
    );
    expect(held.trailers()!['grpc-status']).toBe('0');
    expect(stateLog(log)).toEqual(['upstream reachable', 'upstream unreachable', 'upstream reachable']);
  });

  it('reads a killed engine unreachable and logs it, then reachable again once it restarts on the same port', async () => {
    const engine = await engineProcess();
    const { pool, log } = upstreamFor(engine);
    pool.start();
    await waitFor(() => pool.reachable, 'the engine to be reachable', 15_000);

    await engine.kill();
    await waitFor(() => !pool.reachable, 'the killed engine to read unreachable', 10_000);
    expect(pool.unreachableReason).toContain(`upstream ${engine.address} unreachable`);
    expect(log.find('upstream unreachable', 'warn')).toHaveLength(1);
    expect(log.find('upstream unreachable')[0]!.fields.upstream).toBe(engine.address);

    await engineProcess(engine.port);
    await waitFor(() => pool.reachable, 'the restarted engine to read reachable', 15_000);
    expect(stateLog(log)).toEqual(['upstream reachable', 'upstream unreachable', 'upstream reachable']);
  });
});
