/**
 * A label whose values come from clients (tenants, priorities), bounded so that a client cannot
 * grow the metrics without limit: the first `max` distinct values get a series of their own,
 * every later one is counted as `other`. A value keeps its series for the life of the process,
 * which keeps every counter monotonic (a value that lost its series would move its count into
 * `other` and make a reset out of it); so the values with a series are the first `max` seen, which
 * under a steady mix are the busiest ones. `max` 0 puts everything under `other`.
 */
export const OTHER_LABEL = 'other';

export class BoundedLabels {
  private readonly kept = new Set<string>();

  constructor(readonly max: number) {
    if (!(Number.isSafeInteger(max) && max >= 0)) throw new RangeError(`BoundedLabels max must be an integer >= 0, got ${max}`);
  }

  /** The label value to count `value` under: itself while there is room (or once it has a series), else `other`. */
  label(value: string): string {
    if (this.kept.has(value)) return value;
    if (this.kept.size >= this.max || value === OTHER_LABEL) return OTHER_LABEL;
    this.kept.add(value);
    return value;
  }

  /** The values with a series of their own, in the order they were first seen. */
  values(): string[] {
    return [...this.kept];
  }
}
