/**
 * When an admitted call goes to the engine. Node hands the proxy each frame of a socket read as
 * it is parsed, so a client's HEADERS is seen before the RST_STREAM that follows it in the same
 * read. A Rapid Reset flood (CVE-2023-44487) of such pairs would reach the engine, whose own reset
 * limits would then close the one connection every client's calls share.
 *
 * Calls from a connection that has reset more than one call in ten before any answer therefore
 * wait until the read has been processed, in one setImmediate per batch (FIFO); a call reset
 * meanwhile never reaches the engine. Calls from every other connection go at once: the extra
 * event-loop turn costs about 5% of unary throughput (measured), a price only suspects pay.
 */
import type { DispatchTurn } from './call-context.js';
import { resetsEarly } from './connection-limits.js';

export class DispatchBatch {
  private pending: DispatchTurn[] = [];
  private scheduled = false;
  private readonly runBatch = (): void => this.run();

  readonly schedule = (call: DispatchTurn, stream: object): void => {
    if (!resetsEarly(stream)) return call.onDispatchTurn();
    this.pending.push(call);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.runBatch);
  };

  private run(): void {
    this.scheduled = false;
    const calls = this.pending;
    this.pending = [];
    // Each call guards its own dispatch; none can throw out of onDispatchTurn().
    for (const call of calls) call.onDispatchTurn();
  }
}
