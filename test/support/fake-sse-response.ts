/**
 * A ServerResponse stand-in for SSE tests: records the status, headers and every write, and
 * emits 'close' when the test (or the code) ends or destroys it. `writableLength` is settable
 * to play a reader that stopped reading.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';

export class FakeSseResponse extends EventEmitter {
  status: number | undefined;
  headers: Record<string, string> = {};
  readonly writes: string[] = [];
  writableLength = 0;
  ended = false;
  destroyed = false;

  writeHead(status: number, headers: Record<string, string>): this {
    this.status = status;
    this.headers = headers;
    return this;
  }

  write(chunk: string): boolean {
    this.writes.push(chunk);
    return true;
  }

  end(chunk?: string): this {
    if (chunk !== undefined) this.writes.push(chunk);
    this.ended = true;
    this.emit('close');
    return this;
  }

  destroy(): this {
    this.destroyed = true;
    this.emit('close');
    return this;
  }

  /** The JSON of every `data:` frame written. */
  frames(): unknown[] {
    return this.writes.filter((w) => w.startsWith('data: ')).map((w) => JSON.parse(w.slice('data: '.length)) as unknown);
  }

  asResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }
}
