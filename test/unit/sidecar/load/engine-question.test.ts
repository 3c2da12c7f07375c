/**
 * EngineQuestion against an in-process HTTP/2 engine through a real UpstreamPool: asked until
 * `decide` accepts an answer, failures retried and logged once, UNIMPLEMENTED handed to `decide`
 * as the last word, and stop() cancels what is in flight.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { EngineQuestion } from '../../../../src/sidecar/load/engine-question.js';
import { UpstreamPool } from '../../../../src/sidecar/proxy/upstream.js';
import { startFakeEngineRpc, type RpcAnswer } from '../../../support/fake-engine-rpc.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const PATH = '/test.Engine/Ask';
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function ask(answer: (n: number) => RpcAnswer, decide: (body: Buffer | undefined, attempts: number) => void, timeoutMs = 2000) {
  const engine = await startFakeEngineRpc(PATH, answer);
  cleanups.push(() => engine.close());
  const pool = new UpstreamPool({ target: { host: '127.0.0.1', port: engine.port }, reconnectMinMs: 20, reconnectMaxMs: 50 }, recordingLogger());
  pool.start();
  cleanups.push(() => pool.close());
  const log = recordingLogger();
  const question = new EngineQuestion({ engine: pool, path: PATH, what: 'a test answer', decide, logger: log, timeoutMs, retryMs: 20 });
  cleanups.push(() => question.stop());
  question.start();
  return { engine, question, log };
}

describe('EngineQuestion', () => {
  it('asks until decide accepts an answer: failed statuses and undecodable answers are retried, the failure logged once', async () => {
    const decided: [string | undefined, number][] = [];
    const { engine, question, log } = await ask(
      (n) => (n <= 2 ? { status: GrpcStatus.UNAVAILABLE, message: 'starting' } : { body: Buffer.from(n === 3 ? 'bad' : 'good') }),
      (body, attempts) => {
        if (body?.toString() === 'bad') throw new Error('undecodable');
        decided.push([body?.toString(), attempts]);
      },
    );
    await waitFor(() => question.finished, 'the question answered');
    expect(decided).toEqual([['good', 4]]);
    expect(engine.calls).toBe(4);
    expect(log.lines.filter((line) => line.level === 'warn').map((line) => line.msg)).toEqual([
      'cannot ask the engine for a test answer yet; retrying every 20 ms while it is reachable (logged once)',
    ]);
  });

  it('hands UNIMPLEMENTED to decide as undefined and stops asking', async () => {
    const decided: (Buffer | undefined)[] = [];
    const { engine, question } = await ask(
      () => ({ status: GrpcStatus.UNIMPLEMENTED }),
      (body) => void decided.push(body),
    );
    await waitFor(() => question.finished, 'the question answered');
    expect(decided).toEqual([undefined]);
    expect(engine.calls).toBe(1);
  });

  it('stop() cancels the attempt in flight and asks no more', async () => {
    const { engine, question } = await ask(
      () => 'hang',
      () => {
        throw new Error('never answered');
      },
      60_000,
    );
    await waitFor(() => engine.calls === 1, 'the first attempt');
    question.stop();
    await waitFor(() => engine.cancelled === 1, 'the attempt cancelled');
    expect(question.finished).toBe(true);
    expect(engine.calls).toBe(1);
  });
});
