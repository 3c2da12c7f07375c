/**
 * The round loop every scenario shares. Each round measures every target once; the order rotates
 * (round r starts at target r mod T), so no target always follows the same neighbour or always
 * runs first after a warm-up, and drift of the machine over the run hits all targets alike.
 * A target is warmed up right before its first measurement. A failed measurement is recorded as
 * an error and a null for that round, and the run goes on.
 */
import { summarizeRows } from './summary.js';
import type { Figures, Row, ScenarioResult } from './types.js';

export interface RoundPlan {
  readonly targets: readonly string[];
  readonly rounds: number;
  warmup?(target: string): Promise<void>;
  measure(target: string, round: number): Promise<Figures>;
}

/** Target order of round r: the list rotated to start at r mod T. */
export function rotation<T>(items: readonly T[], round: number): T[] {
  const k = items.length ? round % items.length : 0;
  return [...items.slice(k), ...items.slice(0, k)];
}

export async function runRounds(result: ScenarioResult, plan: RoundPlan): Promise<void> {
  const rows = new Map<string, Row>();
  for (const t of plan.targets) {
    let row = result.rows.find((r) => r.target === t);
    if (!row) {
      row = { target: t, rounds: [], summary: {} };
      result.rows.push(row);
    }
    rows.set(t, row);
  }
  const orders: string[][] = [];
  const warmed = new Set<string>();
  for (let round = 0; round < plan.rounds; round++) {
    const order = rotation(plan.targets, round);
    orders.push(order);
    for (const target of order) {
      const row = rows.get(target)!;
      try {
        if (!warmed.has(target)) {
          warmed.add(target);
          await plan.warmup?.(target);
        }
        row.rounds[round] = await plan.measure(target, round);
      } catch (err) {
        row.rounds[round] = null;
        result.errors.push(`${target} round ${round + 1}: ${(err as Error).message.split('\n')[0]}`);
      }
    }
  }
  for (const row of rows.values()) for (let r = 0; r < plan.rounds; r++) row.rounds[r] ??= null;
  summarizeRows(result.rows);
  result.extra = { ...result.extra, orders };
}
