/**
 * The frontend's request metrics, on the registry it is given. Dynamo's name first
 * (dynamo_frontend_model_rejection_total{model,endpoint}: one per overload answer), then the
 * request, latency, worker-refusal and retry series. The per-worker load gauges belong to the
 * routing side and are not registered here.
 *
 * The `model` label is bounded: a request for a model no worker serves is counted under
 * UNKNOWN_MODEL_LABEL, so clients cannot create series by sending made-up names.
 */
import { Counter, Gauge, Histogram, Summary, type Registry } from 'prom-client';

export type Endpoint = 'chat_completions' | 'completions';
export type WorkerRefusal = 'overloaded' | 'unreachable';

/** The model label of requests for models the router does not know (and of unparsable bodies). */
export const UNKNOWN_MODEL_LABEL = 'unknown';

/** HTTP status recorded for a request whose client went away before the answer was complete (nginx's convention). */
export const CLIENT_CLOSED_STATUS = 499;

/** The series, shared by every RequestRecord. */
interface Series {
  readonly rejections: Counter<'model' | 'endpoint'>;
  readonly requests: Counter<'model' | 'endpoint' | 'status'>;
  readonly inflight: Gauge<'model'>;
  readonly ttft: Histogram<'model'>;
  readonly itl: Histogram<'model'>;
  readonly duration: Histogram<'model' | 'endpoint'>;
  readonly timeToRejection: Summary<'model' | 'endpoint'>;
  readonly workerRejections: Counter<'model' | 'reason'>;
  readonly retries: Counter<'model'>;
}

export class FrontendMetrics {
  private readonly series: Series;

  /** `monotonicMs` times requests (performance.now by default). */
  constructor(
    registry: Registry,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {
    const registers = [registry];
    this.series = {
      rejections: new Counter({
        name: 'dynamo_frontend_model_rejection_total',
        help: 'Requests answered with the overload status because every eligible worker was busy or refused.',
        labelNames: ['model', 'endpoint'],
        registers,
      }),
      requests: new Counter({
        name: 'dynamo_frontend_requests_total',
        help: 'OpenAI requests by final HTTP status (499 = the client went away first).',
        labelNames: ['model', 'endpoint', 'status'],
        registers,
      }),
      inflight: new Gauge({
        name: 'dynamo_frontend_inflight_requests',
        help: 'OpenAI requests being handled right now.',
        labelNames: ['model'],
        registers,
      }),
      ttft: new Histogram({
        name: 'dynamo_frontend_time_to_first_token_seconds',
        help: 'Time from the request reaching the frontend to the first output token from a worker.',
        labelNames: ['model'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
        registers,
      }),
      itl: new Histogram({
        name: 'dynamo_frontend_inter_token_latency_seconds',
        help: 'Time between output tokens of one request (a message of k tokens counts k gaps of a k-th of its wait).',
        labelNames: ['model'],
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5],
        registers,
      }),
      duration: new Histogram({
        name: 'dynamo_frontend_request_duration_seconds',
        help: 'Time from the request reaching the frontend to its last byte (or the client leaving).',
        labelNames: ['model', 'endpoint'],
        buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
        registers,
      }),
      // A summary, not buckets: the goal is a p99 of a few ms, which buckets could only bracket.
      timeToRejection: new Summary({
        name: 'dynamo_frontend_time_to_rejection_seconds',
        help: 'Time from the request reaching the frontend to its overload answer (529) being decided: how fast a refused client can go elsewhere.',
        labelNames: ['model', 'endpoint'],
        percentiles: [0.5, 0.9, 0.99],
        registers,
      }),
      workerRejections: new Counter({
        name: 'dynamo_frontend_worker_rejections_total',
        help: 'Attempts a worker refused before any output: overloaded (RESOURCE_EXHAUSTED) or unreachable (UNAVAILABLE).',
        labelNames: ['model', 'reason'],
        registers,
      }),
      retries: new Counter({
        name: 'dynamo_frontend_retries_total',
        help: 'Attempts made on another worker after a worker refused a request before any output.',
        labelNames: ['model'],
        registers,
      }),
    };
  }

  /** Starts timing one request; its model label is set once the body is read. */
  startRequest(endpoint: Endpoint): RequestRecord {
    return new RequestRecord(this.series, endpoint, this.monotonicMs);
  }
}

/** One request's metrics: every method is safe to call in any order; finish() counts once. */
export class RequestRecord {
  private label = UNKNOWN_MODEL_LABEL;
  private counted = false;
  private finished = false;
  private lastTokenMs: number | undefined;
  private readonly startMs: number;

  constructor(
    private readonly s: Series,
    readonly endpoint: Endpoint,
    private readonly now: () => number,
  ) {
    this.startMs = now();
  }

  get model(): string {
    return this.label;
  }

  /** Sets the model label (UNKNOWN_MODEL_LABEL for models the router does not know) and counts the request in flight. */
  setModel(label: string): void {
    if (this.counted || this.finished) return;
    this.label = label;
    this.counted = true;
    this.s.inflight.inc({ model: label });
  }

  /** `count` output tokens arrived now: the first ones give TTFT, later ones ITL. */
  tokens(count: number): void {
    if (count <= 0) return;
    const s = this.s;
    const now = this.now();
    if (this.lastTokenMs === undefined) s.ttft.observe({ model: this.label }, (now - this.startMs) / 1000);
    else for (let i = 0; i < count; i++) s.itl.observe({ model: this.label }, (now - this.lastTokenMs) / count / 1000);
    this.lastTokenMs = now;
  }

  workerRefused(reason: WorkerRefusal): void {
    this.s.workerRejections.inc({ model: this.label, reason });
  }

  retried(): void {
    this.s.retries.inc({ model: this.label });
  }

  /** The request is answered with the overload status. */
  rejected(): void {
    this.s.rejections.inc({ model: this.label, endpoint: this.endpoint });
    this.s.timeToRejection.observe({ model: this.label, endpoint: this.endpoint }, (this.now() - this.startMs) / 1000);
  }

  /** The answer is complete (or the client left: CLIENT_CLOSED_STATUS). Only the first call counts. */
  finish(status: number): void {
    if (this.finished) return;
    this.finished = true;
    const s = this.s;
    s.requests.inc({ model: this.label, endpoint: this.endpoint, status: String(status) });
    s.duration.observe({ model: this.label, endpoint: this.endpoint }, (this.now() - this.startMs) / 1000);
    if (this.counted) s.inflight.dec({ model: this.label });
  }
}
