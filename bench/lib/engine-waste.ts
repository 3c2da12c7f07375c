/**
 * The simulated engines' wasted tokens, read from their Prometheus endpoints: the series
 * `dynamo_sim_engine_wasted_tokens_total{reason}` summed over every dp rank, per reason. The
 * overload sweep starts fresh engines for each point, so one scrape at its end is the point's total.
 */

import { parsePrometheusText } from '../../src/sidecar/load/prometheus-text.js';

export const WASTE_REASONS = ['cancelled', 'deadline', 'preempted'] as const;
export type WasteReason = (typeof WASTE_REASONS)[number];
export type WastedTokens = Record<WasteReason, number>;

const SERIES = 'dynamo_sim_engine_wasted_tokens_total';
const IN_FLIGHT_SERIES = new Set(['vllm:num_requests_running', 'vllm:num_requests_waiting']);

const noWaste = (): WastedTokens => ({ cancelled: 0, deadline: 0, preempted: 0 });
const isWasteReason = (reason: string | undefined): reason is WasteReason => (WASTE_REASONS as readonly (string | undefined)[]).includes(reason);

/** Sums the series per reason over its other labels; throws if the text has none of it (not the simulated engine, or an older one). */
export function parseWastedTokens(text: string): WastedTokens {
  const sum = noWaste();
  let seen = 0;
  for (const { name, labels, value } of parsePrometheusText(text).samples) {
    if (name !== SERIES) continue;
    const { reason } = labels;
    if (!isWasteReason(reason) || !Number.isFinite(value)) throw new Error(`unexpected ${SERIES} sample: reason ${String(reason)}, value ${value}`);
    sum[reason] += value;
    seen += 1;
  }
  if (seen === 0) throw new Error(`no ${SERIES} series in the scrape`);
  return sum;
}

/** Adds the engines' wasted tokens, reason by reason. */
export function addWastedTokens(a: WastedTokens, b: WastedTokens): WastedTokens {
  const sum = noWaste();
  for (const reason of WASTE_REASONS) sum[reason] = a[reason] + b[reason];
  return sum;
}

/** Sequences an engine still holds: its `vllm:num_requests_running` + `vllm:num_requests_waiting` over every rank. */
export function parseInFlight(text: string): number {
  let sum = 0;
  for (const { name, value } of parsePrometheusText(text).samples) if (IN_FLIGHT_SERIES.has(name)) sum += value;
  return sum;
}

/** A Prometheus endpoint's text; throws on a status other than 2xx. */
export async function scrape(url: string): Promise<string> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  return response.text();
}

/**
 * Sums the wasted tokens of every engine once none holds a sequence any more (the load client's
 * last cancellations travel through frontend and sidecar before they reach the engine), waiting
 * at most `settleTries` x 100 ms for that; past it, scrapes anyway.
 */
export async function scrapeWastedTokens(metricsUrls: readonly string[], settleTries = 50): Promise<WastedTokens> {
  let texts = await Promise.all(metricsUrls.map(scrape));
  for (let i = 0; i < settleTries && texts.some((t) => parseInFlight(t) > 0); i++) {
    await new Promise((r) => setTimeout(r, 100));
    texts = await Promise.all(metricsUrls.map(scrape));
  }
  return texts.map(parseWastedTokens).reduce(addWastedTokens, noWaste());
}
