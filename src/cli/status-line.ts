/**
 * A compact status line on stdout every few seconds, for people watching the demo:
 *   [status] engine 32/32 | queued 16/16 | rejected 1520 (+304/s) | 2310 tok/s | upstream up
 * It sits beside its one user, the run command (run-command.ts): it is console output, not part
 * of the sidecar, which reports through its metrics and logs.
 */
import type { RunningSidecar } from '../sidecar/sidecar.js';

export class StatusLine {
  private readonly timer: NodeJS.Timeout;
  private last: { at: number; rejected: number; outputTokens: number };

  constructor(
    private readonly sidecar: RunningSidecar,
    private readonly out: { write(text: string): unknown },
    intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.last = { at: now(), ...sidecar.counters() };
    this.timer = setInterval(() => this.print(), intervalMs);
    this.timer.unref();
  }

  format(): string {
    const { gate } = this.sidecar;
    const counters = this.sidecar.counters();
    const seconds = Math.max(0.001, (this.now() - this.last.at) / 1000);
    const rejectRate = Math.round((counters.rejected - this.last.rejected) / seconds);
    const tokenRate = Math.round((counters.outputTokens - this.last.outputTokens) / seconds);
    this.last = { at: this.now(), ...counters };
    // N and Q as in force now: they change live (admin API, SIGHUP).
    const off = gate.limit === Infinity;
    const engine = off ? `engine ${gate.inEngine}` : `engine ${gate.inEngine}/${gate.limit}`;
    const queue = off ? 'queue off' : `queued ${gate.queued}/${gate.queueLimit}`;
    return `[status] ${engine} | ${queue} | rejected ${counters.rejected} (+${rejectRate}/s) | ${tokenRate} tok/s${this.sidecar.draining ? ' | draining' : ''}`;
  }

  private print(): void {
    this.out.write(this.format() + '\n');
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
