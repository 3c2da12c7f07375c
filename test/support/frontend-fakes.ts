/**
 * Fakes for the frontend's HTTP tests: a Router whose decisions the test scripts, a
 * ThresholdApi kept in a map, and WorkerClients whose calls play a script (tokens, a refusal,
 * a failure, or nothing until cancelled), recording what the frontend sent and cancelled.
 */
import { EventEmitter } from 'node:events';
import { Registry } from 'prom-client';
import { vllmEngineMessage, type GenerateRequestMessage, type GenerateResponseMessage } from '../../src/protocol/engine/engine-proto.js';
import type { CallClass, CallStatus, GenerateCall, WorkerClients } from '../../src/frontend/generate/worker-clients.js';
import type {
  BusyCheck,
  InactiveCheck,
  InFlight,
  OverloadDetails,
  PriorityScales,
  RouteDecision,
  RouteTarget,
  Router,
  ThresholdApi,
  Thresholds,
} from '../../src/frontend/routing/contracts.js';
import { buildFrontendApp, type FrontendAppDeps, type FrontendAppOptions } from '../../src/frontend/http/app.js';
import { FRONTEND_OPTIONS } from '../../src/frontend/options.js';
import { createDefaultTokenizer } from '../../src/frontend/text/default-tokenizer.js';
import type { PromptTokenizer } from '../../src/frontend/text/prompt-tokenizer.js';
import { silentLogger } from '../../src/platform/log.js';
import { GrpcStatus } from '../../src/protocol/grpc/status.js';

export const target = (workerId: string, address = `10.0.0.${workerId}:9000`, dpRank = 0): RouteTarget => ({ workerId, address, dpRank });

export interface InFlightRecord {
  readonly target: RouteTarget;
  readonly promptTokens: number;
  outputTokens: number;
  ends: number;
}

export const OVERLOAD_DETAILS: OverloadDetails = {
  workers: 2,
  busy: 1,
  worker_overloaded: 1,
  no_credit: 0,
  tried: 1,
  checks: { active_prefill_tokens_threshold: 1 },
};

/** Routes to `targets` in turn, skipping tried ones; overloaded when none is left. */
export class FakeRouter implements Router {
  modelList = ['m1'];
  targets: RouteTarget[] = [target('1')];
  /** When set, decides instead of the targets list. */
  decide: ((model: string, tried: ReadonlySet<string>) => RouteDecision) | undefined;
  readonly routeCalls: { model: string; tried: string[]; promptTokens: number }[] = [];
  /** The priority of each route call, in the same order. */
  readonly routePriorities: (number | undefined)[] = [];
  readonly inflight: InFlightRecord[] = [];
  readonly refused: { workerId: string; kind: string; pushbackMs?: number }[] = [];
  isReady = true;
  inactive: InactiveCheck[] = [];

  models(): string[] {
    return [...this.modelList].sort();
  }

  route(model: string, tried: ReadonlySet<string>, promptTokens: number, priority?: number): RouteDecision {
    this.routeCalls.push({ model, tried: [...tried], promptTokens });
    this.routePriorities.push(priority);
    if (this.decide) return this.decide(model, tried);
    if (!this.modelList.includes(model)) return { kind: 'unknown_model' };
    const next = this.targets.find((t) => !tried.has(t.workerId));
    return next ? { kind: 'route', target: next } : { kind: 'overloaded', details: { ...OVERLOAD_DETAILS, tried: tried.size } };
  }

  begin(t: RouteTarget, promptTokens: number): InFlight {
    const record: InFlightRecord = { target: t, promptTokens, outputTokens: 0, ends: 0 };
    this.inflight.push(record);
    return {
      outputTokens: (delta) => void (record.outputTokens += delta),
      end: () => void record.ends++,
    };
  }

  workerRefused(t: RouteTarget, kind: 'overloaded' | 'unreachable', pushbackMs?: number): void {
    this.refused.push({ workerId: t.workerId, kind, ...(pushbackMs === undefined ? {} : { pushbackMs }) });
  }

  ready(): boolean {
    return this.isReady;
  }

  inactiveChecks(): InactiveCheck[] {
    return this.inactive;
  }
}

export class FakeThresholds implements ThresholdApi {
  readonly values = new Map<string, Thresholds>();
  readonly scales = new Map<string, PriorityScales>();

  priorityScales(model: string): PriorityScales {
    return this.scales.get(model) ?? [];
  }

  setPriorityScales(model: string, scales: PriorityScales): PriorityScales {
    this.scales.set(model, scales);
    return scales;
  }

  get(model: string): Thresholds {
    return (
      this.values.get(model) ?? { active_decode_blocks_threshold: null, active_prefill_tokens_threshold: null, active_prefill_tokens_threshold_frac: null }
    );
  }

  update(model: string, changes: Partial<Thresholds>): Thresholds {
    const next = { ...this.get(model) };
    for (const [key, value] of Object.entries(changes)) if (value !== null && value !== undefined) next[key as BusyCheck] = value;
    this.values.set(model, next);
    return next;
  }

  disable(model: string, check: BusyCheck): Thresholds {
    const next = { ...this.get(model), [check]: null };
    this.values.set(model, next);
    return next;
  }
}

/** A scripted Generate call. */
export class FakeCall extends EventEmitter implements GenerateCall {
  cancelled = false;
  ended = false;

  constructor(
    readonly target: RouteTarget,
    readonly request: GenerateRequestMessage,
    /** What the call's metadata carried: x-request-priority and x-tenant-id. */
    readonly callClass: CallClass = { priority: 0 },
  ) {
    super();
  }

  cancel(): void {
    if (this.ended) return;
    this.cancelled = true;
    this.end({ code: 1, details: 'Cancelled on client' });
  }

  send(message: GenerateResponseMessage): void {
    if (!this.ended) this.emit('data', message);
  }

  end(status: CallStatus): void {
    if (this.ended) return;
    this.ended = true;
    this.emit('status', status);
  }
}

export type Script = (call: FakeCall) => void | Promise<void>;

const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Streams `ids` one chunk each (every `gapMs`), then complete with `finish`, then OK. */
export function streams(ids: number[], finish = 'length', gapMs = 0): Script {
  return async (call) => {
    await later(0);
    const out: number[] = [];
    for (const id of ids) {
      if (call.ended) return;
      out.push(id);
      call.send({ chunk: { token_ids: [id], prompt_tokens: 0, completion_tokens: out.length, cached_tokens: 0 } });
      if (gapMs > 0) await later(gapMs);
    }
    call.send({
      complete: { output_ids: out, finish_reason: finish, prompt_tokens: 0, completion_tokens: out.length, cached_tokens: 0 },
    });
    call.end({ code: 0, details: '' });
  };
}

/** Ends at once with a status and no message. */
export function fails(code: number, details = 'failed', trailers: Record<string, string> = {}): Script {
  return async (call) => {
    await later(0);
    call.end({ code, details, metadata: { get: (key: string) => (key in trailers ? [trailers[key]] : []) } });
  };
}

/** Streams `ids`, then fails with `code`. */
export function failsAfter(ids: number[], code: number): Script {
  return async (call) => {
    await later(0);
    for (const [i, id] of ids.entries()) call.send({ chunk: { token_ids: [id], prompt_tokens: 0, completion_tokens: i + 1, cached_tokens: 0 } });
    await later(5);
    call.end({ code, details: 'engine broke' });
  };
}

/** Sends nothing until cancelled. */
export const hangs: Script = () => {};

export class FakeWorkers implements WorkerClients {
  readonly scripts = new Map<string, Script>();
  readonly calls: FakeCall[] = [];
  defaultScript: Script = streams([1, 2, 3]);
  closed = false;

  generate(t: RouteTarget, request: GenerateRequestMessage, callClass: CallClass): GenerateCall {
    const call = new FakeCall(t, request, callClass);
    this.calls.push(call);
    void (this.scripts.get(t.workerId) ?? this.defaultScript)(call);
    return call;
  }

  close(): void {
    this.closed = true;
  }
}

export interface TestApp {
  readonly app: ReturnType<typeof buildFrontendApp>;
  readonly router: FakeRouter;
  readonly thresholds: FakeThresholds;
  readonly workers: FakeWorkers;
  readonly registry: Registry;
}

export const TEST_OPTIONS: FrontendAppOptions = {
  overloadStatus: 529,
  retryAfterS: 1,
  adminApi: true,
  bodyLimitBytes: 64 * 1024,
  limits: {
    receiveTimeoutMs: FRONTEND_OPTIONS.httpReceiveTimeoutMs.default,
    headersTimeoutMs: FRONTEND_OPTIONS.httpHeadersTimeoutMs.default,
    maxConnections: FRONTEND_OPTIONS.httpMaxConnections.default,
  },
  ready: () => ({ ready: true }),
  requestClasses: {
    defaultPriority: FRONTEND_OPTIONS.defaultPriority.default,
    tenantMaxInflight: FRONTEND_OPTIONS.tenantMaxInflight.default,
    metricsMaxTenants: FRONTEND_OPTIONS.metricsMaxTenants.default,
  },
};

export function testApp(
  overrides: { options?: Partial<FrontendAppOptions>; tokenizer?: PromptTokenizer; workers?: WorkerClients } & Partial<
    Pick<FrontendAppDeps, 'clock' | 'newRequestId' | 'tls' | 'prompts'>
  > = {},
): TestApp {
  const router = new FakeRouter();
  const thresholds = new FakeThresholds();
  const workers = new FakeWorkers();
  const registry = new Registry();
  let seq = 0;
  const app = buildFrontendApp({
    router,
    thresholds,
    workers: overrides.workers ?? workers,
    tokenizer: overrides.tokenizer ?? createDefaultTokenizer(),
    ...(overrides.prompts === undefined ? {} : { prompts: overrides.prompts }),
    registry,
    logger: silentLogger,
    options: { ...TEST_OPTIONS, ...overrides.options },
    clock: overrides.clock ?? { now: () => 1_700_000_000_000, monotonic: () => performance.now() },
    newRequestId: overrides.newRequestId ?? (() => `req${++seq}`),
    tls: overrides.tls,
  });
  return { app, router, thresholds, workers, registry };
}

/** The `tokenized` field a Generate request carries, as the engine decodes it (from `tokenized_bytes`, the form the frontend sends). */
export function sentTokenized(request: GenerateRequestMessage): { original_text: string; input_ids: number[] } | undefined {
  if (request.tokenized_bytes === undefined) return undefined;
  return vllmEngineMessage<{ tokenized?: { original_text: string; input_ids: number[] } }>('GenerateRequest').deserialize(Buffer.from(request.tokenized_bytes))
    .tokenized;
}

/** The `data:` payloads of an SSE body, in order ("[DONE]" kept as a string). */
export function sseEvents(body: string): unknown[] {
  return body
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice('data: '.length);
      return data === '[DONE]' ? data : (JSON.parse(data) as unknown);
    });
}

/** Value of one series in a registry, or undefined. */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  const match = values.find(
    (v) => Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val) && (v as { metricName?: string }).metricName === undefined,
  );
  return match?.value;
}

/**
 * Drives `t` so that every request series of /metrics has a sample (a worker refusal and its
 * retry, a served completion, a 529, each with a tenant), then returns the /metrics text.
 */
export async function metricsWithEverySeries(t: TestApp): Promise<string> {
  t.router.targets = [target('1'), target('2')];
  t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED));
  // A tenant and a priority: the per-class and per-tenant series (outcomes, in-flight gauge).
  await t.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { 'x-tenant-id': 'team-a' },
    payload: { model: 'm1', messages: [{ role: 'user', content: 'x' }], priority: 3 },
  });
  t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
  await t.app.inject({ method: 'POST', url: '/v1/completions', payload: { model: 'm1', prompt: 'x', user: 'team-b' } });
  return (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
}
