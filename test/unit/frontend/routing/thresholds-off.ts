import type { Thresholds } from '../../../../src/frontend/routing/contracts.js';

/** Every busy check off: tests turn on only the checks they are about. */
export const THRESHOLDS_OFF: Thresholds = Object.freeze({
  active_decode_blocks_threshold: null,
  active_prefill_tokens_threshold: null,
  active_prefill_tokens_threshold_frac: null,
});
