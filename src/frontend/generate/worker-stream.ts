/**
 * A Generate call read by pulling: `next()` gives the next message, then exactly one end with
 * the call's status. The attempt loop needs to wait for "first message or end" before
 * deciding to retry, and the response writers need to read at their own pace; both are
 * simpler as awaits than as event listeners. Messages are queued as they arrive (output is
 * bounded by max_tokens and each message is a few bytes, so no backpressure is applied).
 */
import type { GenerateResponseMessage } from '../../protocol/engine/engine-proto.js';
import type { CallStatus, GenerateCall } from './worker-clients.js';

/** How long a worker may take to end its call after its last message. */
export const FINISH_GRACE_MS = 5000;

export type StreamItem = { readonly kind: 'message'; readonly message: GenerateResponseMessage } | { readonly kind: 'end'; readonly status: CallStatus };

export class WorkerStream {
  private readonly queue: GenerateResponseMessage[] = [];
  private status: CallStatus | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly call: GenerateCall) {
    call.on('data', (message) => {
      this.queue.push(message);
      this.notify();
    });
    call.on('status', (status) => {
      this.status ??=
        status.metadata === undefined
          ? { code: status.code, details: status.details }
          : { code: status.code, details: status.details, metadata: status.metadata };
      this.notify();
    });
  }

  /** Waits for the first unread message or the end, without consuming it. */
  async peek(): Promise<StreamItem> {
    for (;;) {
      const message = this.queue[0];
      if (message !== undefined) return { kind: 'message', message };
      if (this.status !== undefined) return { kind: 'end', status: this.status };
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  async next(): Promise<StreamItem> {
    const item = await this.peek();
    if (item.kind === 'message') this.queue.shift();
    return item;
  }

  /**
   * The worker sent its last message: let the call end by itself (its trailers follow at once),
   * so the sidecar sees a finished call, not a reset. A reset after every answer would also count
   * as an early reset there and, past half of a connection's streams, get it closed with GOAWAY.
   * A worker that never sends its trailers is cancelled after `graceMs`.
   */
  finish(graceMs = FINISH_GRACE_MS): void {
    if (this.status !== undefined) return;
    const timer = setTimeout(() => this.cancel(), graceMs);
    timer.unref();
    this.call.on('status', () => clearTimeout(timer));
  }

  /** Cancels the call (no-op once it has ended); queued messages stay readable. */
  cancel(): void {
    if (this.status === undefined) this.call.cancel();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
