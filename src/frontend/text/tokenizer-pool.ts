/**
 * Tokenizer threads (node:worker_threads), so that tokenizing a large prompt never stalls the
 * event loop: every other request, and the workers' load streams, keep being served while it
 * runs (a 7 MB prompt took 1.5 s on the loop, long enough for both workers' streams to look
 * silent). Each thread loads its own tokenizer from the spec (tokenizer-thread.ts); prompts wait
 * in one FIFO queue for the next free thread. A prompt whose client left while it waited is
 * dropped from the queue; one already on a thread runs to the end and its result is dropped.
 * A thread that dies fails its prompt and is replaced. Node's own worker_threads rather than a
 * pool package: one queue and a replacement rule are all this needs.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { TokenizerSpec } from './load-tokenizer.js';
import type { PromptEncoding } from './prompt-encoding.js';

/** What a thread is asked, and what it answers (tokenizer-thread.ts). */
export interface ThreadTask {
  readonly id: number;
  readonly text: string;
  readonly maxBytes: number;
}
export type ThreadReply = { readonly id: number; readonly result: PromptEncoding } | { readonly id: number; readonly error: string };

/** The client left while its prompt waited or ran: nothing to answer. */
export class EncodeAbortedError extends Error {
  override readonly name = 'EncodeAbortedError';
}

interface Task extends ThreadTask {
  readonly resolve: (result: PromptEncoding) => void;
  readonly reject: (error: Error) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

interface Thread {
  readonly worker: Worker;
  task: Task | undefined;
}

export interface TokenizerPoolEvents {
  /** A thread died (and, unless the pool is closed, was replaced); for the log. */
  readonly onThreadError?: (reason: string) => void;
}

/**
 * The thread's code. Built: dist/.../tokenizer-thread.js. From source (vitest, tsx), the .ts
 * file compiled by tsx's CommonJS hook, registered in the thread itself: a thread does not
 * inherit the loader that compiled this module, and on Node 20 ESM hooks registered in a thread
 * do not apply to its imports.
 */
function newThread(spec: TokenizerSpec): Worker {
  const workerData = { spec };
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./tokenizer-thread.js', import.meta.url), { workerData });
  const tsx = createRequire(import.meta.url).resolve('tsx/cjs/api');
  const entry = fileURLToPath(new URL('./tokenizer-thread.ts', import.meta.url));
  return new Worker(`require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(entry)});`, { eval: true, workerData });
}

export class TokenizerPool {
  private readonly threads = new Set<Thread>();
  private readonly queue: Task[] = [];
  private nextId = 1;
  private closed = false;

  private constructor(
    private readonly spec: TokenizerSpec,
    private readonly events: TokenizerPoolEvents,
  ) {}

  /** Starts `size` threads and resolves once each has loaded its tokenizer; rejects (having stopped them) if one cannot. */
  static async start(spec: TokenizerSpec, size: number, events: TokenizerPoolEvents = {}): Promise<TokenizerPool> {
    const pool = new TokenizerPool(spec, events);
    try {
      await Promise.all(Array.from({ length: size }, () => pool.spawn()));
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  /** Threads alive now. */
  get size(): number {
    return this.threads.size;
  }

  /** Prompts waiting for a thread. */
  get queued(): number {
    return this.queue.length;
  }

  /** Encodes on the next free thread. Rejects with EncodeAbortedError when `signal` fires first, or an Error when the thread fails. */
  encode(text: string, maxBytes: number, signal?: AbortSignal): Promise<PromptEncoding> {
    if (this.closed) return Promise.reject(new Error('the tokenizer pool is closed'));
    if (signal?.aborted) return Promise.reject(new EncodeAbortedError('client gone before tokenizing'));
    return new Promise<PromptEncoding>((resolve, reject) => {
      const task: Task = {
        id: this.nextId++,
        text,
        maxBytes,
        resolve,
        reject,
        signal,
        onAbort: () => {
          const at = this.queue.indexOf(task);
          if (at >= 0) this.queue.splice(at, 1);
          reject(new EncodeAbortedError('client gone while its prompt was tokenized'));
        },
      };
      signal?.addEventListener('abort', task.onAbort, { once: true });
      this.queue.push(task);
      this.dispatch();
    });
  }

  /** Stops every thread; prompts waiting or running are rejected. */
  async close(): Promise<void> {
    this.closed = true;
    for (const task of this.queue.splice(0)) settle(task, new Error('the tokenizer pool closed'));
    const threads = [...this.threads];
    this.threads.clear();
    for (const thread of threads) if (thread.task) settle(thread.task, new Error('the tokenizer pool closed'));
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }

  private dispatch(): void {
    for (const thread of this.threads) {
      if (this.queue.length === 0) return;
      if (thread.task !== undefined) continue;
      const task = this.queue.shift()!;
      thread.task = task;
      const message: ThreadTask = { id: task.id, text: task.text, maxBytes: task.maxBytes };
      thread.worker.postMessage(message);
    }
  }

  private spawn(): Promise<void> {
    const worker = newThread(this.spec);
    // The pool is closed explicitly; a forgotten one must not keep the process alive.
    worker.unref();
    const thread: Thread = { worker, task: undefined };
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      worker.on('message', (reply: ThreadReply | { ready: true }) => {
        if ('ready' in reply) {
          ready = true;
          if (this.closed) {
            void worker.terminate();
            resolve();
            return;
          }
          this.threads.add(thread);
          resolve();
          this.dispatch();
          return;
        }
        const task = thread.task;
        if (task === undefined || task.id !== reply.id) return;
        thread.task = undefined;
        if ('error' in reply) settle(task, new Error(`tokenizing failed: ${reply.error}`));
        else settle(task, reply.result);
        this.dispatch();
      });
      const died = (reason: string): void => {
        if (!ready) {
          reject(new Error(reason));
          return;
        }
        if (!this.threads.delete(thread)) return;
        if (thread.task) settle(thread.task, new Error(`the tokenizer thread died: ${reason}`));
        if (this.closed) return;
        this.events.onThreadError?.(reason);
        this.spawn().then(
          () => this.dispatch(),
          (error: unknown) => {
            const why = `no replacement thread: ${error instanceof Error ? error.message : String(error)}`;
            this.events.onThreadError?.(why);
            // With no thread left nothing would ever take the prompts waiting.
            if (this.threads.size === 0) for (const waiting of this.queue.splice(0)) settle(waiting, new Error(why));
          },
        );
      };
      worker.on('error', (error) => died(error.message));
      worker.on('exit', (code) => died(`exited with code ${code}`));
    });
  }
}

function settle(task: Task, outcome: PromptEncoding | Error): void {
  task.signal?.removeEventListener('abort', task.onAbort);
  if (task.signal?.aborted) return;
  if (outcome instanceof Error) task.reject(outcome);
  else task.resolve(outcome);
}
