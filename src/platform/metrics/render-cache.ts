/**
 * Bounds what /metrics costs the event loop: the registry is rendered at most once per
 * `minIntervalMs`, and every scrape in between gets that text. Scrapes that arrive while a render
 * is running wait for it instead of starting their own, so N concurrent scrapes cost one render.
 *
 *   const cache = new RenderCache(() => registry.metrics(), { minIntervalMs: 1000 });
 *   res.end(await cache.text());
 *
 * Why: one render of the sidecar's registry costs about 1 ms of CPU (most of it prom-client's
 * default process collectors: event-loop lag, open fds, active handles), and a flood of scrapes
 * took a whole core and raised proxied call latency. With the cache a flood costs one render per
 * interval plus the HTTP handling of each scrape.
 *
 * Simplification: values are up to `minIntervalMs` old. Counters stay monotonic (a stale text
 * shows an older, smaller value, never a larger one later replaced by a smaller one). A render
 * that fails is not cached; everyone waiting on it gets the error and the next scrape retries.
 * `minIntervalMs` 0 renders for every scrape that does not overlap a running render.
 */
export interface RenderCacheOptions {
  /** Minimum time between the starts of two renders. */
  readonly minIntervalMs: number;
  /** Monotonic milliseconds; injected for tests. Default (or undefined): performance.now(). */
  readonly now?: (() => number) | undefined;
}

export class RenderCache {
  private readonly now: () => number;
  private cached: { text: string; renderedAt: number } | undefined;
  private inFlight: Promise<string> | undefined;
  private renderCount = 0;

  constructor(
    private readonly render: () => Promise<string>,
    private readonly options: RenderCacheOptions,
  ) {
    this.now = options.now ?? (() => performance.now());
  }

  /** How many renders ran so far (for tests and diagnostics). */
  get renders(): number {
    return this.renderCount;
  }

  text(): Promise<string> {
    if (this.inFlight) return this.inFlight;
    const started = this.now();
    if (this.cached && started - this.cached.renderedAt < this.options.minIntervalMs) return Promise.resolve(this.cached.text);
    this.renderCount++;
    const rendering = this.render().then(
      (text) => {
        this.cached = { text, renderedAt: started };
        this.inFlight = undefined;
        return text;
      },
      (err: unknown) => {
        this.inFlight = undefined;
        throw err;
      },
    );
    this.inFlight = rendering;
    return rendering;
  }
}
