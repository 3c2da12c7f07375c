/**
 * What the engine tells of its capacity (dp size, KV block size and blocks, max_num_seqs, max
 * batched tokens), from whichever wire it came (discovery's answers, GetLoads, /metrics), is held
 * to the range of the flag that says the same thing: an engine is not trusted further than an
 * operator. A dp size of 2^31-1 would be 2^31 ranks in memory, and a max_num_seqs past 2^53 an N
 * that is no longer an integer.
 *
 *   const check = new LearnedValueCheck(logger);
 *   check.accept('dataParallelSize', 'dp_rank_count', 2 ** 31 - 1)  // -> undefined, one warning naming dp_rank_count
 *
 * A value out of range is not used: the fact stays unknown, so the sidecar keeps the flag, the
 * last good value (discovery merges rounds) or its default. It is warned about once per engine
 * field for the sidecar's lifetime, whatever else that field says later: polled wires ask several
 * times a second.
 */
import type { BoundedFact } from '../../protocol/engine/engine-facts.js';
import type { Logger } from '../../platform/log.js';
import { CAPACITY_BOUNDS, SIDECAR_OPTIONS } from '../config/options.js';
import { LIVE_SETTINGS } from '../config/sidecar-config.js';

interface Bound {
  readonly min: number;
  readonly max: number;
  /** The flag whose range it is, for the warning. */
  readonly option: keyof typeof CAPACITY_BOUNDS | 'engineRequestLimit';
}

/** max_num_seqs has no flag of its own: it counts calls, as --engine-request-limit does, which it becomes (x 1.5) with auto. */
const LEARNED_BOUNDS: Readonly<Record<BoundedFact, Bound>> = {
  kvBlockSize: { ...CAPACITY_BOUNDS.kvBlockSize, option: 'kvBlockSize' },
  kvTotalBlocks: { ...CAPACITY_BOUNDS.kvTotalBlocks, option: 'kvTotalBlocks' },
  maxNumBatchedTokens: { ...CAPACITY_BOUNDS.maxNumBatchedTokens, option: 'maxNumBatchedTokens' },
  dataParallelSize: { ...CAPACITY_BOUNDS.dataParallelSize, option: 'dataParallelSize' },
  maxRunningRequests: { ...LIVE_SETTINGS.engineRequestLimit, option: 'engineRequestLimit' },
};

/** Whether `value` may stand as `fact`: an integer (so never NaN nor infinite) within its flag's range. */
export function withinBounds(fact: BoundedFact, value: number): boolean {
  const { min, max } = LEARNED_BOUNDS[fact];
  return Number.isSafeInteger(value) && value >= min && value <= max;
}

export class LearnedValueCheck {
  private readonly warned = new Set<string>();

  constructor(private readonly logger: Logger) {}

  /** `value` when within `fact`'s bounds; otherwise undefined, with one warning naming the engine's `field` (for the sidecar's lifetime). */
  accept(fact: BoundedFact, field: string, value: number): number | undefined {
    if (withinBounds(fact, value)) return value;
    if (!this.warned.has(field)) {
      this.warned.add(field);
      const { min, max, option } = LEARNED_BOUNDS[fact];
      const flag = SIDECAR_OPTIONS[option].flag.split(' ')[0];
      this.logger.warn(
        `the engine's ${field} is ${value}, outside ${min}..${max} (the range of ${flag}): not used; the flag, the last good value or the default stands (said once)`,
        { engine_field: field, value: String(value), min, max },
      );
    }
    return undefined;
  }
}
