/**
 * Token timing of one attempt, the same for both transports: the first token is the TTFT sample,
 * each later token one inter-token sample (a message or chunk with several tokens spreads its gap
 * over them), and the attempt's own timing is kept for the SLO.
 */
import type { LoadRecorder, TokenTiming } from './stats.js';

export class TokenClock {
  private lastTokenAt: number | undefined;
  private firstTokenAt: number | undefined;
  /** Tokens after the first: the gaps the mean inter-token latency divides by. */
  private gaps = 0;
  /** Tokens recorded so far (estimated per chunk); the final usage corrects the total. */
  counted = 0;

  constructor(
    private readonly startedAt: number,
    private readonly recorder: LoadRecorder,
  ) {}

  /** `count` tokens arrived now; none is no event. */
  tokens(count: number): void {
    if (count === 0) return;
    const now = performance.now();
    if (this.lastTokenAt === undefined) {
      this.recorder.ttftSample(now - this.startedAt);
      this.firstTokenAt = now;
      this.gaps = count - 1;
    } else {
      // Spread a multi-token chunk's gap over its tokens.
      for (let i = 0; i < count; i++) this.recorder.itlSample((now - this.lastTokenAt) / count);
      this.gaps += count;
    }
    this.lastTokenAt = now;
    this.counted += count;
    this.recorder.tokensReceived(count);
  }

  /** What the SLO judges; undefined before any token. */
  get timing(): TokenTiming | undefined {
    if (this.firstTokenAt === undefined) return undefined;
    return { ttftMs: this.firstTokenAt - this.startedAt, meanItlMs: this.gaps > 0 ? (this.lastTokenAt! - this.firstTokenAt) / this.gaps : undefined };
  }
}
