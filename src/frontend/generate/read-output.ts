/**
 * Reads one generation to its end as text: ids through the decoder and stop strings, each
 * non-empty piece handed to the caller (who streams or collects it). A stop string ends the
 * output at once: finish_reason "stop", and the worker call is cancelled so its sidecar frees
 * the slot instead of generating tokens nobody reads. The generation is always closed.
 */
import type { OutputText } from '../text/output-text.js';
import type { FinishReason, Generation } from './generation.js';

export interface OutputSummary {
  readonly finishReason: FinishReason;
  /** Output tokens received from the worker (up to the stop string, if one ended the output). */
  readonly completionTokens: number;
}

export async function readOutput(generation: Generation, output: OutputText, onText: (text: string) => Promise<void> | void): Promise<OutputSummary> {
  try {
    for (;;) {
      const event = await generation.next();
      const { text, stopped } = event.kind === 'tokens' ? output.push(event.ids) : output.finish();
      if (text !== '') await onText(text);
      if (stopped) return { finishReason: 'stop', completionTokens: generation.completionTokens };
      if (event.kind === 'done') return { finishReason: event.finishReason, completionTokens: generation.completionTokens };
    }
  } finally {
    generation.close();
  }
}
