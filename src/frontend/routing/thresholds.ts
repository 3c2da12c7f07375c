/**
 * Busy thresholds per model: the flag values apply to every model; `/busy_threshold` changes
 * apply to one model and live as long as the process (Dynamo's semantics: null never clears a
 * threshold, only our DELETE turns one check off). Readers call `get(model)` at every routing
 * decision, so a change takes effect on the very next request, not at the next load event.
 * Each model's priority classes (a scale of every threshold per class: priority-classes.ts) live
 * here too, with the same lifetime; a POST replaces a model's list whole.
 */
import type { BusyCheck, PriorityScales, ThresholdApi, Thresholds } from './contracts.js';
import { NO_PRIORITY_SCALES } from './priority-classes.js';

export class ThresholdStore implements ThresholdApi {
  private readonly perModel = new Map<string, Thresholds>();
  private readonly scalesPerModel = new Map<string, PriorityScales>();

  /** `defaultScales`: --priority-threshold-scale, every model's classes until the API sets its own. */
  constructor(
    private readonly defaults: Thresholds,
    private readonly defaultScales: PriorityScales = NO_PRIORITY_SCALES,
  ) {}

  priorityScales(model: string): PriorityScales {
    return this.scalesPerModel.get(model) ?? this.defaultScales;
  }

  setPriorityScales(model: string, scales: PriorityScales): PriorityScales {
    const frozen = Object.freeze([...scales].sort((a, b) => a.priority - b.priority));
    this.scalesPerModel.set(model, frozen);
    return frozen;
  }

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

  private set(model: string, thresholds: Thresholds): Thresholds {
    const frozen = Object.freeze({ ...thresholds });
    this.perModel.set(model, frozen);
    return frozen;
  }
}
