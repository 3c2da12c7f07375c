/**
 * Live engine-request-limit changes under load, as a timeline: the simulated vLLM engine (in this
 * process, so its in-flight count is read from inside), the real sidecar (dist/cli/main.js, its
 * admin API on), and closed-loop Generate callers. N changes through `PUT /admission` every
 * phase; every --sample-ms one line: time, calls in the engine, queued in the sidecar, N in force
 * (--compact: only the lines where one of them changed, and one every 500 ms).
 *
 *   npx tsc -p tsconfig.json && node --import tsx bench/live-limits.ts [--limits 8,4,12] [--callers 30]
 *       [--phase-ms 3000] [--sample-ms 50] [--max-tokens 10-40] [--compact] [--json]
 *
 * Ends with, per phase, the most calls the engine held once it had come down to the phase's N
 * (never above N) and the calls completed; any call that failed is counted and makes it exit 1.
 */
import * as grpc from '@grpc/grpc-js';
import { parseArgs } from 'node:util';
import { mulberry32 } from '../src/platform/prng.js';
import type { GenerateRequestMessage } from '../src/protocol/engine/engine-proto.js';
import { vllmEngineService } from '../src/protocol/engine/engine-services.js';
import { startSimulatedEngine } from '../src/tools/engine/index.js';
import { REPO_ROOT, SIDECAR_MAIN } from './lib/paths.js';
import { spawnProcess, stopAll, localSidecarEnv } from './lib/spawn.js';

const { values } = parseArgs({
  options: {
    limits: { type: 'string', default: '8,4,12' },
    callers: { type: 'string', default: '30' },
    'phase-ms': { type: 'string', default: '3000' },
    'sample-ms': { type: 'string', default: '50' },
    'max-tokens': { type: 'string', default: '10-40' },
    json: { type: 'boolean', default: false },
    compact: { type: 'boolean', default: false },
  },
});
const limits = values.limits.split(',').map(Number);
const callers = Number(values.callers);
const phaseMs = Number(values['phase-ms']);
const sampleMs = Number(values['sample-ms']);
const [minTokens, maxTokens] = values['max-tokens'].split('-').map(Number) as [number, number];
if (!limits.every((n) => Number.isInteger(n) && n >= 1) || !(callers >= 1) || !(phaseMs >= 100) || !(sampleMs >= 5) || !(maxTokens >= minTokens)) {
  throw new Error('--limits N,N,..., --callers, --phase-ms (>= 100), --sample-ms (>= 5), --max-tokens MIN-MAX');
}
const TOKEN = `bench-${Math.random().toString(36).slice(2)}-${Date.now()}`;

interface Sample {
  t: number;
  inEngine: number;
  queued: number;
  limit: number;
}

const engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 20 });
const sidecar = spawnProcess('sidecar', process.execPath, [SIDECAR_MAIN, '--upstream', engine.address, '--engine-request-limit', String(limits[0])], {
  cwd: REPO_ROOT,
  env: localSidecarEnv({
    DYN_DYNAMO_REQUEST_QUEUE_LIMIT: String(callers), // every caller fits: the change, not a rejection, is measured
    DYN_SIDECAR_ADMIN_TOKEN: TOKEN,
    DYN_ENGINE_LOAD_SOURCE: 'traffic',
    DYN_LOG_LEVEL: 'warn',
  }),
});
const listening = await sidecar.waitFor(/listening on \S+:(\d+), upstream .*, system port (\d+)/, 15_000);
const client = new (vllmEngineService())(`127.0.0.1:${listening[1]}`, grpc.credentials.createInsecure());
const systemPort = Number(listening[2]);
const admission = async (method: 'GET' | 'PUT', body?: unknown): Promise<{ engine_request_limit: number; state: { request_queue: number } }> => {
  const res = await fetch(`http://127.0.0.1:${systemPort}/admission`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(5000),
  });
  if (res.status !== 200) throw new Error(`${method} /admission: ${res.status} ${await res.text()}`);
  return (await res.json()) as { engine_request_limit: number; state: { request_queue: number } };
};

const random = mulberry32(20261203);
let stopped = false;
let completed = 0;
const failures = new Map<string, number>();
const call = (index: number): Promise<void> =>
  new Promise((resolve) => {
    const request: GenerateRequestMessage = {
      request_id: `live-${index}`,
      tokenized: { input_ids: Array.from({ length: 32 }, (_, i) => 1 + ((index * 31 + i) % 31_999)) },
      sampling_params: { max_tokens: minTokens + Math.floor(random() * (maxTokens - minTokens + 1)) },
      stream: true,
    };
    const stream = (client as unknown as { Generate(r: unknown): grpc.ClientReadableStream<unknown> }).Generate(request);
    stream.on('data', () => {});
    stream.on('error', () => {});
    stream.on('status', (status: grpc.StatusObject) => {
      if (status.code === grpc.status.OK) completed++;
      else failures.set(grpc.status[status.code], (failures.get(grpc.status[status.code]) ?? 0) + 1);
      resolve();
    });
  });
let next = 0;
const lanes = Array.from({ length: callers }, async () => {
  while (!stopped) await call(next++);
});

const samples: Sample[] = [];
const changes: { t: number; limit: number }[] = [];
const start = performance.now();
const elapsed = (): number => Math.round(performance.now() - start);
let current = limits[0]!;
const sampler = setInterval(() => {
  const { running, waiting } = engine.stats();
  void admission('GET').then(
    (a) => samples.push({ t: elapsed(), inEngine: running + waiting, queued: a.state.request_queue, limit: a.engine_request_limit }),
    () => undefined,
  );
}, sampleMs);

try {
  for (let phase = 0; phase < limits.length; phase++) {
    if (phase > 0) {
      current = limits[phase]!;
      changes.push({ t: elapsed(), limit: current });
      await admission('PUT', { engine_request_limit: current });
    }
    await new Promise((resolve) => setTimeout(resolve, phaseMs)); // deliberate: each phase runs this long
  }
} finally {
  clearInterval(sampler);
  stopped = true;
  await Promise.all(lanes);
  client.close();
  await stopAll();
  await engine.close();
}

// Per phase: the most the engine held from the first sample at or below N on (a lowering waits for calls to finish).
const phases = limits.map((limit, i) => {
  const from = i === 0 ? 0 : changes[i - 1]!.t;
  const to = i < changes.length ? changes[i]!.t : Infinity;
  const inPhase = samples.filter((s) => s.t >= from && s.t < to);
  const settledAt = inPhase.findIndex((s) => s.inEngine <= limit);
  const settled = settledAt < 0 ? [] : inPhase.slice(settledAt);
  return {
    limit,
    settle_ms: settledAt < 0 ? null : inPhase[settledAt]!.t - from,
    max_in_engine_after_settle: settled.length ? Math.max(...settled.map((s) => s.inEngine)) : null,
    max_in_engine_before_settle: settledAt > 0 ? Math.max(...inPhase.slice(0, settledAt).map((s) => s.inEngine)) : null,
  };
});
const summary = { node: process.version, callers, limits, phase_ms: phaseMs, sample_ms: sampleMs, completed, failed: Object.fromEntries(failures), phases };
if (values.json) {
  console.log(JSON.stringify({ ...summary, samples, changes }));
} else {
  console.log('   t_ms  in_engine  queued  limit');
  let shown: Sample | undefined;
  for (const s of samples) {
    const change = changes.find((c) => c.t <= s.t && c.t > s.t - sampleMs);
    const same = shown !== undefined && shown.inEngine === s.inEngine && shown.queued === s.queued && shown.limit === s.limit;
    if (values.compact && same && !change && s.t - shown!.t < 500) continue;
    shown = s;
    console.log(
      `${String(s.t).padStart(7)}  ${String(s.inEngine).padStart(9)}  ${String(s.queued).padStart(6)}  ${String(s.limit).padStart(5)}${change ? `   <- PUT engine_request_limit=${change.limit} at ${change.t} ms` : ''}`,
    );
  }
  console.log(JSON.stringify(summary));
}
process.exitCode = failures.size === 0 ? 0 : 1;
