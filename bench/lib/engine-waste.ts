/**
 * The simulated engines' wasted tokens, read from their Prometheus endpoints: the series
 * `dynamo_sim_engine_wasted_tokens_total{reason}` summed over every dp rank, per reason. The
 * overload sweep starts fresh engines for each point, so one scrape at its end is the point's total.
 */

export const WASTE_REASONS = ['cancelled', 'deadline', 'preempted'] as const;
export type WasteReason = (typeof WASTE_REASONS)[number];
export type WastedTokens = Record<WasteReason, number>;

const SERIES = 'dynamo_sim_engine_wasted_tokens_total';

/** Sums the series per reason over its other labels; throws if the text has none of it (not the simulated engine, or an older one). */
export function parseWastedTokens(text: string): WastedTokens {
  const sum: WastedTokens = { cancelled: 0, deadline: 0, preempted: 0 };
  let seen = 0;
  for (const line of text.split('\n')) {
    const match = /^dynamo_sim_engine_wasted_tokens_total\{([^}]*)\}\s+(\S+)/u.exec(line);
    if (match === null) continue;
    const reason = /(?:^|,)reason="([^"]*)"/u.exec(match[1]!)?.[1];
    const value = Number(match[2]);
    if (!(WASTE_REASONS as readonly string[]).includes(reason ?? '') || !Number.isFinite(value)) {
      throw new Error(`unexpected ${SERIES} sample: ${line}`);
    }
    sum[reason as WasteReason] += value;
    seen += 1;
  }
  if (seen === 0) throw new Error(`no ${SERIES} series in the scrape`);
  return sum;
}

/** Adds the engines' wasted tokens, reason by reason. */
export function addWastedTokens(a: WastedTokens, b: WastedTokens): WastedTokens {
  return { cancelled: a.cancelled + b.cancelled, deadline: a.deadline + b.deadline, preempted: a.preempted + b.preempted };
}

/** Sequences an engine still holds: its `vllm:num_requests_running` + `vllm:num_requests_waiting` over every rank. */
export function parseInFlight(text: string): number {
  let sum = 0;
  for (const match of text.matchAll(/^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+(\S+)/gmu)) sum += Number(match[1]);
  return sum;
}

async function scrape(url: string): Promise<string> {
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
  return texts.map(parseWastedTokens).reduce(addWastedTokens, { cancelled: 0, deadline: 0, preempted: 0 });
}
