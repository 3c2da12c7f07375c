// Reading one generation to its end as text: pieces to the caller, stop strings, the finish reason, always closed.
import { describe, expect, it } from 'vitest';
import { FrontendError } from '../../../../src/frontend/generate/errors.js';
import type { Generation, GenerationEvent } from '../../../../src/frontend/generate/generation.js';
import { readOutput } from '../../../../src/frontend/generate/read-output.js';
import { OutputText } from '../../../../src/frontend/text/output-text.js';
import type { PromptTokenizer } from '../../../../src/frontend/text/prompt-tokenizer.js';

/** id n renders as the letter n (0 = 'a'). */
const letters: PromptTokenizer = {
  name: 'letters',
  encode: () => [],
  eachToken: () => {},
  decoder: () => ({ push: (ids) => ids.map((id) => String.fromCharCode(97 + id)).join(''), flush: () => '' }),
};

/** A generation playing `script` (an Error entry is thrown), counting tokens, reads and closes. */
function scripted(script: (GenerationEvent | Error)[]): Generation & { closes: number; reads: number } {
  let completionTokens = 0;
  const fake = {
    closes: 0,
    reads: 0,
    promptTokens: 1,
    get completionTokens() {
      return completionTokens;
    },
    next: () => {
      fake.reads++;
      const item = script.shift();
      if (item === undefined) return Promise.reject(new Error('read past the end'));
      if (item instanceof Error) return Promise.reject(item);
      if (item.kind === 'tokens') completionTokens += item.ids.length;
      return Promise.resolve(item);
    },
    close: () => void fake.closes++,
  };
  return fake as unknown as Generation & { closes: number; reads: number };
}

const tokens = (...ids: number[]): GenerationEvent => ({ kind: 'tokens', ids });

describe('readOutput', () => {
  it("hands each piece to the caller and returns the worker's finish reason and token count", async () => {
    const generation = scripted([tokens(0, 1), tokens(2), { kind: 'done', finishReason: 'length' }]);
    const pieces: string[] = [];
    const summary = await readOutput(generation, new OutputText(letters, []), (text) => void pieces.push(text));
    expect(pieces).toEqual(['ab', 'c']);
    expect(summary).toEqual({ finishReason: 'length', completionTokens: 3 });
    expect(generation.closes).toBe(1);
  });

  it('never hands the caller an empty piece (text held back by a possible stop string)', async () => {
    const generation = scripted([tokens(0), tokens(23), { kind: 'done', finishReason: 'stop' }]);
    const pieces: string[] = [];
    await readOutput(generation, new OutputText(letters, ['xy']), (text) => void pieces.push(text));
    // 'x' is held (it may start "xy") and released at the end.
    expect(pieces).toEqual(['a', 'x']);
  });

  it('ends at a stop string with finish_reason stop, counting tokens up to it, and reads no further', async () => {
    const generation = scripted([tokens(0), tokens(1, 2), tokens(3), { kind: 'done', finishReason: 'length' }]);
    const pieces: string[] = [];
    const summary = await readOutput(generation, new OutputText(letters, ['c']), (text) => void pieces.push(text));
    expect(pieces).toEqual(['a', 'b']);
    expect(summary).toEqual({ finishReason: 'stop', completionTokens: 3 });
    expect(generation.reads).toBe(2);
    // close() is what cancels the worker call, so its sidecar frees the slot.
    expect(generation.closes).toBe(1);
  });

  it('finds a stop string completed by the held-back text at the end of the output', async () => {
    const generation = scripted([tokens(0, 1), { kind: 'done', finishReason: 'length' }]);
    const summary = await readOutput(generation, new OutputText(letters, ['b']), () => {});
    expect(summary.finishReason).toBe('stop');
  });

  it('closes the generation and rethrows when it fails', async () => {
    const failure = new FrontendError('worker_failed', 'boom');
    const generation = scripted([tokens(0), failure]);
    await expect(readOutput(generation, new OutputText(letters, []), () => {})).rejects.toBe(failure);
    expect(generation.closes).toBe(1);
  });

  it('closes the generation and rethrows when the caller fails to take a piece', async () => {
    const generation = scripted([tokens(0), { kind: 'done', finishReason: 'stop' }]);
    const gone = new Error('client gone');
    await expect(
      readOutput(generation, new OutputText(letters, []), () => {
        throw gone;
      }),
    ).rejects.toBe(gone);
    expect(generation.closes).toBe(1);
    expect(generation.reads).toBe(1);
  });

  it('waits for an asynchronous caller before reading on', async () => {
    const generation = scripted([tokens(0), tokens(1), { kind: 'done', finishReason: 'stop' }]);
    const readsSeen: number[] = [];
    await readOutput(generation, new OutputText(letters, []), async () => {
      await Promise.resolve();
      readsSeen.push(generation.reads);
    });
    expect(readsSeen).toEqual([1, 2]);
  });
});
