/**
 * The frontend's own time to 529, read from its Prometheus endpoint: the summary
 * `dynamo_frontend_time_to_rejection_seconds{model,endpoint,quantile}` (from the request reaching
 * the frontend to its overload answer being decided). The overload sweep starts a fresh frontend
 * for each point, so one scrape at its end covers the point. The load client's time to 529 also
 * holds the client's own event loop and the loopback; this one is what the frontend itself spent.
 */
import { parsePrometheusText } from '../../src/sidecar/load/prometheus-text.js';
import { scrape } from './engine-waste.js';

const SERIES = 'dynamo_frontend_time_to_rejection_seconds';

export interface FrontendRejections {
  /** Overload answers the frontend decided. */
  readonly count: number;
  /** Quantiles in ms; NaN without any answer. */
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/**
 * The quantiles of the label set with the most answers (a sweep sends one model to one
 * endpoint, so that is all of them; quantiles of several sets cannot be merged).
 */
export function parseFrontendRejections(text: string): FrontendRejections {
  const sets = new Map<string, { count: number; quantiles: Map<string, number> }>();
  for (const { name, labels, value } of parsePrometheusText(text).samples) {
    if (name !== SERIES && name !== `${SERIES}_count`) continue;
    const key = `${labels['model'] ?? ''}\u0000${labels['endpoint'] ?? ''}`;
    const set = sets.get(key) ?? { count: 0, quantiles: new Map<string, number>() };
    sets.set(key, set);
    if (name === `${SERIES}_count`) set.count = value;
    else if (labels['quantile'] !== undefined) set.quantiles.set(labels['quantile'], value);
  }
  let best: { count: number; quantiles: Map<string, number> } | undefined;
  for (const set of sets.values()) if (set.count > 0 && (best === undefined || set.count > best.count)) best = set;
  if (!best) return { count: 0, p50Ms: NaN, p99Ms: NaN };
  const ms = (q: string): number => 1000 * (best.quantiles.get(q) ?? NaN);
  return { count: best.count, p50Ms: ms('0.5'), p99Ms: ms('0.99') };
}

export async function scrapeFrontendRejections(frontendUrl: string): Promise<FrontendRejections> {
  return parseFrontendRejections(await scrape(`${frontendUrl}/metrics`));
}
