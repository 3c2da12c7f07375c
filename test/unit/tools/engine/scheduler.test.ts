// Scheduler behaviour under a fake clock: batching, KV accounting, preemption, idling.
import { describe, expect, it } from 'vitest';
import { Scheduler, type FinishReason, type SchedulerConfig } from '../../../../src/tools/engine/scheduler.js';
import { FakeTimers } from '../../../support/fake-timers.js';

const BASE: SchedulerConfig = {
  numGpuBlocks: 100,
  blockSize: 16,
  maxNumSeqs: 8,
  maxNumBatchedTokens: 1000,
  prefillTokensPerS: 100_000, // 1 ms per 100 prompt tokens
  decodeStepMs: 10,
  earlyStopProb: 0,
  seed: 1,
  vocabSize: 1000,
};

function setup(config: Partial<SchedulerConfig> = {}) {
  const timers = new FakeTimers();
  const scheduler = new Scheduler({ ...BASE, ...config }, timers);
  const submit = (prompt: number, maxTokens: number, first = 1) => {
    const out = { tokens: [] as number[], finish: undefined as FinishReason | undefined, times: [] as number[] };
    const handle = scheduler.submit({ promptIds: Array.from({ length: prompt }, (_, i) => first + i), maxTokens }, (ids, finish) => {
      out.tokens.push(...ids);
      out.times.push(timers.now);
      out.finish = finish;
    });
    return { out, handle };
  };
  return { timers, scheduler, submit };
}

describe('Scheduler', () => {
  it('prefills, samples the first token at the end of prefill, then decodes one token per step', () => {
    const { timers, submit } = setup();
    const { out } = submit(200, 3);
    timers.advance(2); // 200 tokens at 100k/s = 2 ms
    expect(out.tokens).toHaveLength(1);
    timers.advance(10);
    expect(out.tokens).toHaveLength(2);
    timers.advance(10);
    expect(out).toMatchObject({ finish: 'length' });
    expect(out.tokens).toHaveLength(3);
    expect(out.times).toEqual([2, 12, 22]);
  });

  it('holds ceil((prompt + generated) / block_size) blocks while running and none after finishing', () => {
    const { timers, scheduler, submit } = setup();
    submit(30, 5);
    expect(scheduler.stats().usedBlocks).toBe(2); // 30 tokens
    timers.advance(1); // first token: 31 tokens, still 2 blocks
    timers.advance(10); // 32 tokens
    expect(scheduler.stats().usedBlocks).toBe(2);
    timers.advance(10); // 33 tokens -> third block
    expect(scheduler.stats().usedBlocks).toBe(3);
    timers.advance(100);
    expect(scheduler.stats()).toMatchObject({ usedBlocks: 0, running: 0, generatedTokens: 5 });
  });

  it('keeps a request whose prompt does not fit waiting, in FIFO order, until blocks are freed', () => {
    const { timers, scheduler, submit } = setup();
    const a = submit(960, 50); // 60 blocks
    timers.advance(1);
    const b = submit(640, 50); // 40 blocks: fits exactly only if a has not grown
    const c = submit(16, 5); // would fit, but must not overtake b
    timers.advance(50);
    expect(scheduler.stats()).toMatchObject({ running: 1, waiting: 2 });
    expect(c.out.tokens).toHaveLength(0);
    a.handle.cancel();
    // Nothing else was running, so the freed blocks go to b then c at once: 40 + 1 blocks.
    expect(scheduler.stats()).toMatchObject({ running: 2, waiting: 0, usedBlocks: 41 });
    timers.advance(20);
    expect(b.out.tokens.length).toBeGreaterThan(0);
    expect(c.out.tokens.length).toBeGreaterThan(0);
  });

  it('never runs more than max_num_seqs sequences at once', () => {
    const { timers, scheduler, submit } = setup({ maxNumSeqs: 2 });
    for (let i = 0; i < 5; i++) submit(16, 100, i * 100);
    timers.advance(50);
    expect(scheduler.stats()).toMatchObject({ running: 2, waiting: 3 });
  });

  it('chunks prefill by max_num_batched_tokens', () => {
    const { timers, submit } = setup({ maxNumBatchedTokens: 100 });
    const { out } = submit(250, 1); // chunks of 100, 100 and 50 tokens: 1 + 1 + 0.5 ms
    timers.advance(2.4);
    expect(out.tokens).toHaveLength(0);
    timers.advance(0.2);
    expect(out.tokens).toHaveLength(1);
  });

  it('preempts the newest sequence when growth finds no free block, and it resumes later', () => {
    const { timers, scheduler, submit } = setup({ numGpuBlocks: 4, blockSize: 4 });
    // Each needs up to 4 blocks (4 prompt + 12 output = 16 tokens); together they outgrow the 4.
    const a = submit(4, 12);
    const b = submit(4, 12, 50);
    for (let i = 0; i < 200 && (a.out.finish === undefined || b.out.finish === undefined); i++) timers.advance(10);
    expect(a.out).toMatchObject({ finish: 'length' });
    expect(b.out).toMatchObject({ finish: 'length' });
    expect(a.out.tokens).toHaveLength(12);
    expect(b.out.tokens).toHaveLength(12);
    expect(scheduler.stats().preemptions).toBeGreaterThan(0);
    expect(scheduler.stats().usedBlocks).toBe(0);
  });

  it('stops early with reason "stop" when early-stop probability is 1', () => {
    const { timers, submit } = setup({ earlyStopProb: 1 });
    const { out } = submit(10, 100);
    timers.advance(5);
    expect(out).toMatchObject({ finish: 'stop' });
    expect(out.tokens).toHaveLength(1);
  });

  it('draws token ids from the seed and prompt only', () => {
    const run = (seed: number) => {
      const { timers, submit } = setup({ seed });
      const { out } = submit(10, 20);
      timers.advance(1000);
      return out.tokens;
    };
    expect(run(3)).toEqual(run(3));
    expect(run(3)).not.toEqual(run(4));
    expect(run(3).every((t) => t >= 1 && t < 1000)).toBe(true);
  });

  it('leaves no timer pending when idle, after cancelling everything, and after close', () => {
    const { timers, scheduler, submit } = setup();
    submit(10, 2);
    timers.advance(100);
    expect(timers.active).toBe(0);
    const { handle } = submit(10, 100);
    expect(timers.active).toBe(1);
    handle.cancel();
    expect(timers.active).toBe(0);
    submit(10, 100);
    submit(10, 100);
    scheduler.close();
    expect(timers.active).toBe(0);
    expect(scheduler.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
  });

  it('sends nothing to a sequence after it is cancelled', () => {
    const { timers, submit } = setup();
    const a = submit(10, 100);
    const b = submit(10, 100, 500);
    timers.advance(25);
    const seen = a.out.tokens.length;
    a.handle.cancel();
    timers.advance(100);
    expect(a.out.tokens).toHaveLength(seen);
    expect(b.out.tokens.length).toBeGreaterThan(seen);
  });

  it("frees a cancelled running sequence's blocks at once and drops a cancelled waiting one from the queue", () => {
    const { timers, scheduler, submit } = setup({ maxNumSeqs: 1 });
    const running = submit(40, 100); // 3 blocks
    const waiting = submit(40, 100, 500);
    timers.advance(25);
    expect(scheduler.stats()).toMatchObject({ running: 1, waiting: 1 });
    expect(scheduler.stats().usedBlocks).toBeGreaterThanOrEqual(3);
    waiting.handle.cancel();
    expect(scheduler.stats()).toMatchObject({ running: 1, waiting: 0 });
    running.handle.cancel();
    // No step in between: the blocks are back as soon as cancel returns.
    expect(scheduler.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
    expect(timers.active).toBe(0);
    expect(waiting.out.tokens).toHaveLength(0);
  });
});
