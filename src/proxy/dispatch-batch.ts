/**
 * Dispatch turns for admitted calls. Node hands the proxy each frame of a socket read as it is
 * parsed, so a client's HEADERS is seen before the RST_STREAM that follows it in the same read.
 * Dispatching at once would open (and then cancel) an engine stream for every such call: a
 * Rapid Reset flood (CVE-2023-44487) would reach the engine, whose own reset limits would then
 * close the one connection every client's calls share. Admitted calls wait instead until the
 * read has been processed, in one setImmediate per batch (FIFO), and a call reset meanwhile
 * never reaches the engine.
 */
import type { DispatchTurn } from './call-context.js';

export class DispatchBatch {
  private pending: DispatchTurn[] = [];
  private scheduled = false;
  private readonly runBatch = (): void => this.run();

  readonly schedule = (call: DispatchTurn): void => {
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
