/**
 * The frontend status page's one event stream: every tick the rates are sampled, and while a
 * page is open the fleet view and the rates become one JSON snapshot shared by every page.
 *
 *   snapshot = { kind, started, time, admin, overload_status, models, workers, rates, history }
 *
 * `admin` tells the page whether it may offer edits: "here" (this port serves /busy_threshold),
 * "elsewhere" (--admin-address: another port, which the page does not call) or "off".
 */
import type { Registry } from 'prom-client';
import { SseHub } from '../../platform/status/sse-hub.js';
import type { ThresholdApi } from '../routing/contracts.js';
import type { WorkerPool } from '../routing/worker-pool.js';
import { fleetView } from './fleet-view.js';
import { FrontendRates } from './frontend-rates.js';

export type AdminPlacement = 'here' | 'elsewhere' | 'off';

export interface FrontendStatusDeps {
  readonly pool: WorkerPool;
  readonly thresholds: Pick<ThresholdApi, 'get' | 'priorityScales'>;
  readonly maxPredictedTtftMs: number | null;
  readonly registry: Registry;
  readonly admin: AdminPlacement;
  readonly overloadStatus: number;
  readonly now?: () => number;
  readonly onError?: (error: Error) => void;
}

export const STATUS_INTERVAL_MS = 1000;
/** Open pages per process; more get 503 (each costs a socket and a write per tick). */
export const STATUS_MAX_CLIENTS = 32;
/** Sparklines: 3 minutes at one sample a second. */
const HISTORY_TICKS = 180;
/** TTFT quantiles over the last 10 s: recent enough to move with an overload, wide enough to have samples. */
const TTFT_WINDOW_TICKS = 10;

export function frontendStatusHub(deps: FrontendStatusDeps, intervalMs = STATUS_INTERVAL_MS): SseHub {
  const now = deps.now ?? Date.now;
  const started = now();
  const rates = new FrontendRates(deps.registry, { historyTicks: HISTORY_TICKS, ttftWindowTicks: TTFT_WINDOW_TICKS }, now);
  return new SseHub({
    intervalMs,
    maxClients: STATUS_MAX_CLIENTS,
    sample: () => rates.sample(),
    snapshot: () => {
      const time = now();
      const { workers, models } = fleetView(deps, time);
      return {
        kind: 'frontend',
        started,
        time,
        interval_ms: intervalMs,
        admin: deps.admin,
        overload_status: deps.overloadStatus,
        models,
        workers,
        rates: rates.latest,
        history: rates.history.toJSON(),
      };
    },
    ...(deps.onError && { onError: deps.onError }),
  });
}
