/**
 * Busy thresholds per model: the flag values apply to every model; `/busy_threshold` changes
 * apply to one model and live as long as the process (Dynamo's semantics: null never clears a
 * threshold, only our DELETE turns one check off). Readers call `get(model)` at every routing
 * decision, so a change takes effect on the very next request, not at the next load event.
 */
import type { BusyCheck, InactiveCheck, ThresholdApi, Thresholds } from './contracts.js';

export const NO_THRESHOLDS: Thresholds = Object.freeze({
  active_decode_blocks_threshold: null,
  active_prefill_tokens_threshold: null,
  active_prefill_tokens_threshold_frac: null,
});

/** Which configured checks cannot fire on which workers of a model (the router knows). */
export type CheckDiagnosis = (model: string, thresholds: Thresholds) => InactiveCheck[];

export class ThresholdStore implements ThresholdApi {
  private readonly perModel = new Map<string, Thresholds>();

  constructor(
    private readonly defaults: Thresholds,
    private readonly diagnose: CheckDiagnosis,
  ) {}

  get(model: string): Thresholds {
    return this.perModel.get(model) ?? this.defaults;
  }

  update(model: string, changes: Partial<Thresholds>): Thresholds {
    const next: Record<BusyCheck, number | null> = { ...this.get(model) };
    for (const [check, value] of Object.entries(changes) as [BusyCheck, number | null | undefined][]) {
      if (check in next && value !== null && value !== undefined) next[check] = value;
    }
    return this.set(model, next);
  }

  disable(model: string, check: BusyCheck): Thresholds {
    return this.set(model, { ...this.get(model), [check]: null });
  }

  inactiveChecks(model: string): InactiveCheck[] {
    return this.diagnose(model, this.get(model));
  }

  private set(model: string, thresholds: Thresholds): Thresholds {
    const frozen = Object.freeze({ ...thresholds });
    this.perModel.set(model, frozen);
    return frozen;
  }
}
