/**
 * One Server-Sent Events stream shared by every open status page of a process. A single timer
 * ticks every `intervalMs`:
 *
 *   tick -> sample()              always (cheap: a few counters into the history ring)
 *        -> snapshot() -> JSON    only while a client is connected, computed and serialized
 *                                 once, then written to every client
 *
 * Bounded: at most `maxClients` streams (attach() refuses beyond, the caller answers 503); a
 * client whose unsent output passes `maxBufferedBytes` (a reader that stopped reading) is cut
 * off; a closed connection leaves the set at once. close() ends every stream and the timer, so
 * a server's graceful close is not held open by a page left open.
 */
import type { ServerResponse } from 'node:http';

export interface SseHubOptions {
  readonly intervalMs: number;
  readonly maxClients: number;
  /** Called once per tick whether or not anyone watches (rate history). */
  readonly sample?: () => void | Promise<void>;
  /** Called once per tick while at least one client is attached; must be JSON-serializable. */
  readonly snapshot: () => unknown;
  /** Unsent bytes one client may hold before it is dropped. Default 1 MiB. */
  readonly maxBufferedBytes?: number;
  /** Told about a tick that threw (the stream goes on at the next tick). */
  readonly onError?: (error: Error) => void;
}

export const SSE_HEADERS = Object.freeze({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  // A proxy that buffers (nginx) would hold the stream back.
  'x-accel-buffering': 'no',
});

export class SseHub {
  private readonly clients = new Set<ServerResponse>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private closed = false;
  private last: string | undefined;
  private ticks = 0;
  private snapshots = 0;

  constructor(private readonly options: SseHubOptions) {}

  /** Starts ticking (sampling history); idempotent. The timer never keeps the process alive. */
  start(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** Ticks run and snapshots computed so far (tests: one snapshot per tick however many clients). */
  get counts(): { ticks: number; snapshots: number } {
    return { ticks: this.ticks, snapshots: this.snapshots };
  }

  /**
   * Takes over `res` as an event stream (status 200 and the SSE headers are written here).
   * false when full or closed: nothing was written and the caller answers 503.
   */
  attach(res: ServerResponse): boolean {
    if (this.closed || this.clients.size >= this.options.maxClients) return false;
    this.start();
    res.writeHead(200, SSE_HEADERS);
    // The browser waits this long before reconnecting after the stream drops.
    res.write('retry: 1000\n\n');
    this.clients.add(res);
    res.on('close', () => this.clients.delete(res));
    // The first client of a while gets a fresh snapshot now rather than at the next tick.
    if (this.clients.size === 1 || this.last === undefined) void this.tick(false);
    else this.send(res, this.last);
    return true;
  }

  /** Ends every stream and stops the timer. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    for (const res of this.clients) res.end();
    this.clients.clear();
  }

  private async tick(sample = true): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    try {
      if (sample) {
        this.ticks++;
        await this.options.sample?.();
      }
      if (this.clients.size === 0) {
        this.last = undefined;
        return;
      }
      this.snapshots++;
      this.last = `data: ${JSON.stringify(this.options.snapshot())}\n\n`;
      for (const res of this.clients) this.send(res, this.last);
    } catch (err) {
      this.options.onError?.(err as Error);
    } finally {
      this.ticking = false;
    }
  }

  private send(res: ServerResponse, frame: string): void {
    if (res.writableLength > (this.options.maxBufferedBytes ?? 1024 * 1024)) {
      this.clients.delete(res);
      res.destroy();
      return;
    }
    res.write(frame);
  }
}
