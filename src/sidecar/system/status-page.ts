/**
 * The sidecar's status page on its system port: GET / (redirect) and /status, the page's script
 * and style under /status/, and GET /status/events, one SSE stream shared by every open page
 * (503 beyond its client cap). Each snapshot: the gate's N, Q and F with their occupancy, calls
 * and rejections per second by reason (from this registry, as /metrics shows them), the
 * engine's reachability and load source, each dp rank's latest load event, and the admission
 * settings. The page edits settings only through the admin API (PUT /admission with the token
 * the operator types in); the page itself changes nothing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { LoadEvent } from '../../protocol/load-event.js';
import { sumByLabel } from '../../platform/status/metric-reader.js';
import { ratePerSecond, SeriesHistory } from '../../platform/status/series-history.js';
import { SseHub } from '../../platform/status/sse-hub.js';
import { ASSET_HEADERS, StatusAssets, type Asset } from '../../platform/status/status-assets.js';
import { settingsJson, type AdmissionControl } from '../admission/admission-control.js';
import type { AdmissionGate } from '../admission/gate.js';
import type { SystemRoute } from './system-server.js';

export interface EngineView {
  readonly address: string;
  readonly reachable: boolean;
  /** Why not, when unreachable. */
  readonly reason: string | undefined;
  /** How the sidecar learns the engine's load, e.g. "scrape http://host:port/metrics every 50 ms". */
  readonly loadSource: string;
}

export interface SidecarStatusDeps {
  readonly registry: Registry;
  readonly gate: Pick<AdmissionGate, 'inEngine' | 'queued' | 'limit' | 'queueLimit' | 'firstTokenLimit' | 'awaitingFirstToken'>;
  readonly control: Pick<AdmissionControl, 'settings' | 'limitInForce' | 'lastChange'>;
  /** The admin API (PUT /admission) is on: --admin-token is set. */
  readonly adminApi: boolean;
  readonly engine: () => EngineView;
  /** The latest load event of each dp rank. */
  readonly ranks: () => readonly LoadEvent[];
  readonly draining: () => boolean;
  readonly now?: () => number;
  readonly intervalMs?: number;
  readonly onError?: (error: Error) => void;
}

const PAGE_PATHS = new Set(['/', '/status', '/status/events']);
const HISTORY_TICKS = 180;
const MAX_CLIENTS = 32;

export class SidecarStatusPage implements SystemRoute {
  private readonly hub: SseHub;
  private readonly assets = new StatusAssets('sidecar.html', ['status.js', 'sidecar.js', 'status.css']);
  private readonly history = new SeriesHistory(HISTORY_TICKS, ['requests', 'rejections', 'in_engine', 'queued']);
  private previous: { at: number; requests: Map<string, number>; rejections: Map<string, number> } | undefined;
  private rates: { requests: Record<string, number>; rejections: Record<string, number> } = { requests: {}, rejections: {} };
  private readonly now: () => number;
  private readonly started: number;

  constructor(private readonly deps: SidecarStatusDeps) {
    this.now = deps.now ?? Date.now;
    this.started = this.now();
    const intervalMs = deps.intervalMs ?? 1000;
    this.hub = new SseHub({
      intervalMs,
      maxClients: MAX_CLIENTS,
      sample: () => this.sample(),
      snapshot: () => this.snapshot(intervalMs),
      ...(deps.onError && { onError: deps.onError }),
    });
  }

  /** Starts sampling the rates (the history is there when a page opens). */
  start(): void {
    this.hub.start();
  }

  close(): void {
    this.hub.close();
  }

  handles(url: string | undefined): boolean {
    const path = (url ?? '/').split('?')[0]!;
    return PAGE_PATHS.has(path) || path.startsWith('/status/');
  }

  serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'application/json', allow: 'GET, HEAD' });
      res.end(JSON.stringify({ error: 'only GET and HEAD' }) + '\n');
    } else if (path === '/') {
      res.writeHead(302, { location: '/status' });
      res.end();
    } else if (path === '/status') send(res, this.assets.pageAsset());
    else if (path === '/status/events') {
      if (!this.hub.attach(res)) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '5' });
        res.end(JSON.stringify({ error: 'too many status pages open; try again later' }) + '\n');
      }
    } else {
      const asset = this.assets.file(path.slice('/status/'.length));
      if (asset) send(res, asset);
      else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: `no such file ${path}` }) + '\n');
      }
    }
    return Promise.resolve();
  }

  private async sample(): Promise<void> {
    const reading = {
      at: this.now(),
      requests: await sumByLabel(this.deps.registry, 'dynamo_sidecar_requests_total', 'grpc_code'),
      rejections: await sumByLabel(this.deps.registry, 'dynamo_sidecar_rejections_total', 'reason'),
    };
    const before = this.previous;
    this.previous = reading;
    if (!before) return;
    const elapsed = reading.at - before.at;
    const rates = (now: Map<string, number>, then: Map<string, number>): Record<string, number> =>
      Object.fromEntries([...now].map(([key, value]) => [key, Math.round(ratePerSecond(then.get(key) ?? 0, value, elapsed) * 100) / 100]));
    this.rates = { requests: rates(reading.requests, before.requests), rejections: rates(reading.rejections, before.rejections) };
    const sum = (record: Record<string, number>): number => Math.round(Object.values(record).reduce((a, b) => a + b, 0) * 100) / 100;
    this.history.push(reading.at, {
      requests: sum(this.rates.requests),
      rejections: sum(this.rates.rejections),
      in_engine: this.deps.gate.inEngine,
      queued: this.deps.gate.queued,
    });
  }

  private snapshot(intervalMs: number): unknown {
    const { gate, control } = this.deps;
    const ranks = this.deps.ranks();
    const finite = (n: number): number | null => (Number.isFinite(n) ? n : null);
    return {
      kind: 'sidecar',
      started: this.started,
      time: this.now(),
      interval_ms: intervalMs,
      worker_id: ranks[0] === undefined ? null : String(ranks[0].worker_id),
      model: ranks[0]?.model ?? null,
      draining: this.deps.draining(),
      admin_api: this.deps.adminApi,
      admission: {
        engine_request: gate.inEngine,
        engine_request_limit: control.limitInForce ?? null,
        request_queue: gate.queued,
        request_queue_limit: gate.queueLimit,
        first_token_pending: gate.awaitingFirstToken,
        first_token_limit: finite(gate.firstTokenLimit),
      },
      settings: settingsJson(control.settings),
      last_change: { source: control.lastChange.source, time: new Date(control.lastChange.at).toISOString() },
      engine: this.deps.engine(),
      ranks: ranks.map((r) => ({
        dp_rank: r.dp_rank,
        kv_used_blocks: r.kv_used_blocks ?? r.active_decode_blocks,
        kv_total_blocks: r.kv_total_blocks,
        active_prefill_tokens: r.active_prefill_tokens,
        predicted_ttft_ms: r.predicted_ttft_ms,
        overloaded: r.overloaded,
      })),
      rates: this.rates,
      history: this.history.toJSON(),
    };
  }
}

function send(res: ServerResponse, asset: Asset): void {
  res.writeHead(200, { ...ASSET_HEADERS, 'content-type': asset.contentType });
  res.end(asset.body);
}
