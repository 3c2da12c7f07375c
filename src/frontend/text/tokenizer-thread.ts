/**
 * The body of one tokenizer thread (node:worker_threads), started by tokenizer-pool.ts: loads
 * its own tokenizer from the spec it is given, says `ready` (or fails, which the pool reports),
 * then encodes one prompt per message. The field's bytes go back as a transferred ArrayBuffer of
 * exactly their size, so the event loop receives them without a copy. No top-level await: run
 * from source, the file is compiled to CommonJS (tokenizer-pool.ts, threadEntry).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadTokenizer, type TokenizerSpec } from './load-tokenizer.js';
import { encodePrompt } from './prompt-encoding.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';
import type { ThreadReply, ThreadTask } from './tokenizer-pool.js';

function serve(tokenizer: PromptTokenizer, task: ThreadTask): void {
  let reply: ThreadReply;
  let transfer: ArrayBuffer[] = [];
  try {
    const result = encodePrompt(tokenizer, task.text, task.maxBytes);
    if (result.kind === 'encoded') {
      // The writer's buffer is larger than the field: a copy here (off the event loop) leaves only the field to keep.
      const exact = result.tokenized.slice();
      reply = { id: task.id, result: { ...result, tokenized: exact } };
      transfer = [exact.buffer];
    } else {
      reply = { id: task.id, result };
    }
  } catch (error) {
    reply = { id: task.id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort!.postMessage(reply, transfer);
}

void loadTokenizer((workerData as { spec: TokenizerSpec }).spec).then((tokenizer) => {
  parentPort!.on('message', (task: ThreadTask) => serve(tokenizer, task));
  parentPort!.postMessage({ ready: true });
});
