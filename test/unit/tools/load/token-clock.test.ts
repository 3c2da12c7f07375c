// One attempt's token timing: the first token is the TTFT sample, each later token one ITL sample
// (a multi-token message spreads its gap), and the attempt's own timing for the SLO.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LoadRecorder } from '../../../../src/tools/load/stats.js';
import { TokenClock } from '../../../../src/tools/load/token-clock.js';

let now = 0;
afterEach(() => vi.restoreAllMocks());

function clockAt(startedAt: number): { clock: TokenClock; recorder: LoadRecorder } {
  vi.spyOn(performance, 'now').mockImplementation(() => now);
  const recorder = new LoadRecorder();
  return { clock: new TokenClock(startedAt, recorder), recorder };
}

describe('TokenClock', () => {
  it('has no timing before a token, and ignores a message without tokens', () => {
    const { clock, recorder } = clockAt(0);
    now = 10;
    clock.tokens(0);
    expect(clock.timing).toBeUndefined();
    expect(recorder.outputTokens).toBe(0);
  });

  it('samples TTFT once and one ITL per later token, spreading a message over its tokens', () => {
    const { clock, recorder } = clockAt(100);
    now = 130;
    clock.tokens(1);
    now = 150;
    clock.tokens(1);
    now = 190;
    clock.tokens(2);
    const s = recorder.summary('t', 1000);
    expect(s.ttft_ms).toEqual({ p50: 30, p90: 30, p99: 30 });
    expect(s.itl_ms).toEqual({ p50: 20, p90: 20, p99: 20 });
    expect(clock.timing).toEqual({ ttftMs: 30, meanItlMs: 20 }); // 60 ms over 3 gaps
    expect([clock.counted, recorder.outputTokens]).toEqual([4, 4]);
  });

  it('counts a first message of several tokens as their first and the rest as gaps of zero length', () => {
    const { clock } = clockAt(0);
    now = 50;
    clock.tokens(3);
    expect(clock.timing).toEqual({ ttftMs: 50, meanItlMs: 0 });
    const single = clockAt(0).clock;
    single.tokens(1);
    expect(single.timing?.meanItlMs).toBeUndefined();
  });
});
