// Scheduler behaviour under a fake clock: batching, KV accounting, preemption, idling, step cost.
import { describe, expect, it } from 'vitest';
import { stepMs, type CostModel } from '../../../../src/tools/engine/cost-model.js';
import { Scheduler, type FinishReason, type SchedulerConfig } from '../../../../src/tools/engine/scheduler.js';
import { fixedStepCost, type StepCost } from '../../../../src/tools/engine/step-cost.js';
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

  it('counts the work a preemption throws away, exactly, as preempted', () => {
    const { timers, scheduler, submit } = setup({ numGpuBlocks: 3, blockSize: 4 });
    // a prefills alone (its first token takes a second block); the next step decodes a and
    // prefills b (the third block), whose first token finds no block: b, the newest, is preempted
    // (4 prefilled + 1 generated = 5 wasted). It resumes once a (6 tokens) completes and
    // prefills its 5-token context again.
    const a = submit(4, 6);
    const b = submit(4, 6, 50);
    timers.advance(11);
    expect(scheduler.stats()).toMatchObject({ preemptions: 1, wastedPreemptedTokens: 5, running: 1, waiting: 1 });
    for (let i = 0; i < 100 && b.out.finish === undefined; i++) timers.advance(10);
    expect(a.out.tokens).toHaveLength(6);
    expect(b.out.tokens).toHaveLength(6);
    expect(scheduler.stats()).toMatchObject({
      preemptions: 1,
      prefilledTokens: 4 + 4 + 5,
      generatedTokens: 12,
      wastedPreemptedTokens: 5,
      wastedCancelledTokens: 0,
      wastedDeadlineTokens: 0,
    });
  });

  it("counts a dropped sequence's work since admission by reason, once, and nothing after it completed or at close", () => {
    const { timers, scheduler, submit } = setup();
    const c = submit(200, 100); // prefill 2 ms + first token, then 10 ms per token
    const d = submit(100, 100, 500);
    const done = submit(10, 1, 900);
    const closed = submit(10, 100, 1500);
    timers.advance(25);
    expect(c.out.tokens).toHaveLength(3);
    c.handle.cancel();
    c.handle.cancel();
    d.handle.cancel('deadline');
    done.handle.cancel();
    expect(closed.out.tokens).toHaveLength(2);
    scheduler.close();
    expect(scheduler.stats()).toMatchObject({ wastedCancelledTokens: 203, wastedDeadlineTokens: 102, wastedPreemptedTokens: 0 });
  });

  it('counts nothing for a sequence cancelled while still waiting for KV', () => {
    const { timers, scheduler, submit } = setup({ numGpuBlocks: 1, blockSize: 16 });
    submit(10, 100);
    const queued = submit(10, 100, 50);
    timers.advance(5);
    queued.handle.cancel();
    expect(scheduler.stats()).toMatchObject({ waiting: 0, wastedCancelledTokens: 0 });
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

describe('Scheduler step cost', () => {
  // A toy GPU where KV reads matter: 1e9 bf16 parameters read at 1e12 B/s (2 ms a step), 5120 KV
  // bytes per token, 1 ms overhead; prefill at 2e9 FLOPs per token over 1e14 FLOP/s.
  const TOY: CostModel = {
    model: { parameters: 1e9, layers: 10, kvHeads: 2, headDim: 64, weightBytes: 2, kvBytes: 2 },
    gpu: { count: 1, memoryBytes: 80e9, bandwidthBytesPerS: 2e12, peakFlops: 2e14 },
    calibration: { efficiency: 0.5, fixedOverheadMs: 1 },
  };

  function run(stepCost: StepCost | undefined, prompts: readonly number[], maxTokens: number, config: Partial<SchedulerConfig> = {}) {
    const timers = new FakeTimers();
    const scheduler = new Scheduler({ ...BASE, numGpuBlocks: 100_000, maxNumSeqs: 1000, maxNumBatchedTokens: 100_000, ...config }, timers, stepCost);
    const times = prompts.map(() => [] as number[]);
    prompts.forEach((prompt, i) =>
      scheduler.submit({ promptIds: Array.from({ length: prompt }, (_, t) => i * 100_000 + t + 1), maxTokens }, () => times[i]!.push(timers.now)),
    );
    timers.advance(1_000_000);
    return times;
  }

  /** The gap between the last two tokens of the first sequence: one decode step. */
  const decodeStep = (times: number[][]): number => times[0]!.at(-1)! - times[0]!.at(-2)!;
  const roofline: StepCost = (work) => stepMs(TOY, work);

  it('under the cost model, a decode step grows with the batch size', () => {
    const one = decodeStep(run(roofline, [1000], 5));
    const many = decodeStep(run(roofline, Array<number>(64).fill(1000), 5));
    // The last step reads the weights and each context so far: 1 + (2e9 + 1004 * 5120 bytes) / 1e12 B/s.
    expect(one).toBeCloseTo(1 + (2e9 + 1004 * 5120) / 1e9, 6);
    // The first submit plans a step at once, alone: it is one token ahead of the other 63.
    expect(many).toBeCloseTo(1 + (2e9 + (1004 + 63 * 1003) * 5120) / 1e9, 6);
    expect(many).toBeGreaterThan(one * 1.1);
  });

  it('under the cost model, a decode step grows with the context the sequence has read', () => {
    const short = decodeStep(run(roofline, [100], 5));
    const long = decodeStep(run(roofline, [50_000], 5));
    expect(long - short).toBeCloseTo(((50_000 - 100) * 5120) / 1e9, 6);
    // The same sequence slows down as its own context grows token by token.
    const times = run(roofline, [16], 200)[0]!;
    expect(times.at(-1)! - times.at(-2)!).toBeGreaterThan(times[2]! - times[1]!);
  });

  it('under the cost model, a step that prefills while others decode costs both', () => {
    const timers = new FakeTimers();
    const scheduler = new Scheduler({ ...BASE, numGpuBlocks: 100_000, maxNumBatchedTokens: 100_000 }, timers, roofline);
    const decoder: number[] = [];
    scheduler.submit({ promptIds: [1, 2, 3, 4], maxTokens: 10 }, () => decoder.push(timers.now));
    timers.advance(10); // its prefill and a few decode steps of about 3 ms
    const before = decoder.length;
    const joinedAt = timers.now;
    scheduler.submit({ promptIds: Array.from({ length: 5000 }, (_, i) => 1000 + i), maxTokens: 1 }, () => undefined);
    timers.advance(1000);
    // The decoder's next token came after a mixed step: overhead + its decode + a 5000-token prefill (50 ms).
    const gaps = decoder.slice(before).map((t, i, all) => t - (i === 0 ? joinedAt : all[i - 1]!));
    expect(Math.max(...gaps)).toBeGreaterThan(50);
  });

  it('under the fixed model, steps are exactly those of before: decode_step_ms at any batch and context', () => {
    const fixed = fixedStepCost(BASE);
    for (const prompts of [[200], Array<number>(8).fill(200), [20_000]]) {
      expect(run(fixed, prompts, 4)).toEqual(run(undefined, prompts, 4));
    }
    // The first prefills alone (200 tokens at 100k/s = 2 ms); the next step decodes it and prefills
    // the other 7 (10 + 14 ms); then one 10 ms step per token, however many run.
    expect(run(fixed, Array<number>(8).fill(200), 3)).toEqual([[2, 26, 36], ...Array<number[]>(7).fill([26, 36, 46])]);
  });
});
