/**
 * The broker-less load push end to end: the real sidecar process (bin/dynamo-sidecar), the
 * simulated engine in process, and a grpc-js client of dynamo.sidecar.v1.WorkerLoad generated at
 * run time from the repo's proto (proto-loader, keepCase), the way a frontend would use it. Also
 * the three identity fields on NATS (a real nats-server), --served-model-name over the engine's
 * name, and the demo mode learning its model the same way.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type EngineOptions, type RunningEngine } from '../../../../src/tools/engine/index.js';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { loadSubject } from '../../../../src/protocol/load-event.js';
import { startNatsServer } from '../../../support/nats-server.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, startGenerate, tokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';
import { runCleanups } from '../../../support/cleanups.js';

const PROTO_ROOT = fileURLToPath(new URL('../../../../proto/', import.meta.url));

interface RankLoad {
  worker_id: number;
  dp_rank: number;
  active_decode_blocks: number;
  active_prefill_tokens: number;
  kv_used_blocks?: number | null;
  kv_total_blocks?: number | null;
  max_num_batched_tokens?: number | null;
  engine_request: number;
  request_queue: number;
  engine_request_limit?: number | null;
  overloaded: boolean;
  draining: boolean;
  timestamp_ms: number;
  sequence: number;
  model: string;
  grpc_address: string;
  heartbeat_ms: number;
}
interface Received {
  readonly rank: RankLoad;
  /** Date.now() at receipt. */
  readonly at: number;
}

type WatchStream = grpc.ClientReadableStream<{ ranks: RankLoad[] }>;
type WorkerLoadClient = grpc.Client & { Watch(request: object): WatchStream };
const WorkerLoad = (() => {
  const definition = protoLoader.loadSync('dynamo/sidecar/v1/worker_load.proto', { keepCase: true, longs: Number, defaults: true, includeDirs: [PROTO_ROOT] });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as { dynamo: { sidecar: { v1: { WorkerLoad: grpc.ServiceClientConstructor } } } };
  return pkg.dynamo.sidecar.v1.WorkerLoad;
})();

// Everything a test starts is stopped after it, last started first, even when it fails.
const cleanups: (() => unknown)[] = [];
afterEach(() => runCleanups(cleanups));

async function engine(options: Partial<EngineOptions>): Promise<RunningEngine> {
  const e = await startSimulatedEngine(options);
  cleanups.push(() => e.close());
  return e;
}

async function sidecar(args: string[], env: Record<string, string> = {}): Promise<SidecarProcess> {
  const s = await startSidecarProcess(args, env);
  cleanups.push(() => s.stop('SIGKILL'));
  return s;
}

interface Watcher {
  readonly got: Received[];
  /** The stream's final status, once it ended. */
  readonly status: Promise<grpc.StatusObject>;
  latest(): RankLoad | undefined;
  cancel(): void;
}

/** Opens WorkerLoad/Watch on `address` and records every rank-0 update with its receipt time. */
function watch(address: string): Watcher {
  const client = new WorkerLoad(address, grpc.credentials.createInsecure()) as unknown as WorkerLoadClient;
  cleanups.push(() => client.close());
  const call = client.Watch({});
  cleanups.push(() => call.cancel());
  const got: Received[] = [];
  call.on('data', (update: { ranks: RankLoad[] }) => void got.push({ rank: update.ranks[0]!, at: Date.now() }));
  call.on('error', () => {});
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  return { got, status, latest: () => got[got.length - 1]?.rank, cancel: () => call.cancel() };
}

/** A streaming Generate call through the sidecar that runs until cancelled (or for `maxTokens` decode steps). */
function holdGenerate(address: string, maxTokens: number): { cancel(): void; done: Promise<grpc.status> } {
  const client = engineClient(address);
  cleanups.push(() => client.close());
  const call = startGenerate(client, {
    request_id: `watch-${Math.random()}`,
    tokenized: { original_text: '', input_ids: tokens(32) },
    sampling_params: { max_tokens: maxTokens, n: 1 },
    stream: true,
  });
  call.on('data', () => {});
  call.on('error', () => {});
  const done = new Promise<grpc.status>((resolve) => call.on('status', (s: grpc.StatusObject) => resolve(s.code)));
  cleanups.push(() => call.cancel());
  return { cancel: () => call.cancel(), done };
}

/** Sum of every dynamo_sidecar_requests_total series: the proxied calls that ended. */
async function proxiedCallsEnded(s: SidecarProcess): Promise<number> {
  const text = await s.metrics();
  return text
    .split('\n')
    .filter((line) => line.startsWith('dynamo_sidecar_requests_total{'))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;

describe('WorkerLoad/Watch on the sidecar port (real sidecar, simulated engine, grpc-js client)', () => {
  it("streams the engine's model, the bound address, engine_request up and back to 0, heartbeats while idle, and draining on SIGTERM", async () => {
    const e = await engine({ modelName: 'acme/watch-model-7b', decodeStepMs: 20 });
    // The load comes from this sidecar's own traffic alone. With the default source (the engine's
    // GetLoads, read every 250 ms) the engine's KV usage is read after the calls end, late under
    // load, and each read that sees a change is an update of its own: the idle stretch below would
    // not be idle.
    const s = await sidecar([
      '--engine-load-source',
      'traffic',
      '--upstream',
      e.address,
      '--engine-request-limit',
      '4',
      '--load-heartbeat-ms',
      '300',
      '--worker-id',
      '31',
      '--drain-grace-ms',
      '20000',
    ]);
    const w = watch(s.address);

    // The model is learned from the engine's GetModelInfo, without any call from a client.
    await waitFor(() => w.latest()?.model === 'acme/watch-model-7b', "an update with the engine's model", 10_000);
    expect(w.got[0]!.rank.sequence).toBe(1);
    expect(w.latest()).toMatchObject({ worker_id: 31, dp_rank: 0, grpc_address: `127.0.0.1:${s.port}`, heartbeat_ms: 300, engine_request: 0, draining: false });
    expect(s.address).toBe(`127.0.0.1:${s.port}`); // the port actually bound (asked for 0)
    expect(await s.metric('dynamo_sidecar_load_watchers')).toBe(1);

    // Calls in the engine show up at once (debounced), and their end too.
    const calls = [holdGenerate(s.address, 2000), holdGenerate(s.address, 2000), holdGenerate(s.address, 2000)];
    await waitFor(() => w.latest()?.engine_request === 3, 'engine_request 3 in an update', 5000);
    expect(w.latest()!.active_decode_blocks + w.latest()!.active_prefill_tokens).toBeGreaterThan(0);
    for (const c of calls) c.cancel();
    await waitFor(() => w.latest()?.engine_request === 0 && w.latest()?.active_decode_blocks === 0, 'engine_request back to 0', 5000);
    await waitFor(async () => (await proxiedCallsEnded(s)) === 3, 'the three Generate calls counted as ended', 5000);

    // Idle: updates keep coming, about one per heartbeat, with nothing changed but the stamp.
    const idleFrom = w.got.length;
    await waitFor(() => w.got.length >= idleFrom + 4, 'four heartbeat updates while idle', 5000);
    const idle = w.got.slice(idleFrom);
    const gaps = idle.slice(1).map((r, i) => r.at - idle[i]!.at);
    expect(median(gaps)).toBeGreaterThan(200);
    expect(median(gaps)).toBeLessThan(600);
    const { sequence: _s, timestamp_ms: _t, ...first } = idle[0]!.rank;
    for (const r of idle) expect(r.rank).toMatchObject({ ...first, engine_request: 0 });
    expect(idle.map((r) => r.rank.sequence)).toEqual(idle.map((_, i) => idle[0]!.rank.sequence + i));

    // Watching is not a proxied call: another watch opened and cancelled leaves the request
    // metrics and the gate alone.
    const other = watch(s.address);
    await waitFor(() => other.got.length > 0, 'the second watch');
    await waitFor(async () => (await s.metric('dynamo_sidecar_load_watchers')) === 2, 'two watchers');
    other.cancel();
    expect((await other.status).code).toBe(grpc.status.CANCELLED);
    await waitFor(async () => (await s.metric('dynamo_sidecar_load_watchers')) === 1, 'the cancelled watcher gone');
    expect(await proxiedCallsEnded(s)).toBe(3);
    expect(await s.metric('dynamo_engine_request')).toBe(0);

    // SIGTERM with a call still in the engine: the watch says draining at once, a new watch is
    // still served during the drain, and both end UNAVAILABLE when the sidecar exits.
    const last = holdGenerate(s.address, 2000);
    await waitFor(() => w.latest()?.engine_request === 1, 'the last call in an update', 5000);
    s.proc.kill('SIGTERM');
    await waitFor(() => w.latest()?.draining === true, 'draining=true in an update', 3000);
    const during = watch(s.address);
    await waitFor(() => during.got.length > 0, 'a watch opened while draining', 3000);
    expect(during.got[0]!.rank).toMatchObject({ draining: true, engine_request: 1, model: 'acme/watch-model-7b' });
    last.cancel();
    expect(await s.exited()).toBe(0);
    for (const ended of [await w.status, await during.status]) expect(ended).toMatchObject({ code: grpc.status.UNAVAILABLE, details: 'sidecar shutting down' });
  });

  it('NATS events carry the same model, grpc_address and heartbeat_ms as the watch; --served-model-name wins over the engine', async () => {
    const nats = await startNatsServer();
    cleanups.push(() => nats.stop());
    const e = await engine({ modelName: 'engine-says-this' });
    const subject = loadSubject('dynamo', 'watch', 'generate');
    const nc: NatsConnection = await connect({ servers: nats.url });
    cleanups.push(() => nc.close());
    const events: LoadEvent[] = [];
    nc.subscribe(subject, { callback: (_err, msg) => void events.push(msg.json<LoadEvent>()) });
    await nc.flush();
    const s = await sidecar(
      ['--upstream', e.address, '--nats-url', nats.url, '--component', 'watch', '--load-heartbeat-ms', '250', '--served-model-name', 'team/served-name'],
      { DYN_SIDECAR_ADVERTISE_ADDRESS: 'worker-b.example:0' },
    );
    const w = watch(s.address);
    await waitFor(() => events.length >= 3 && w.got.length >= 2, 'NATS events and watch updates', 10_000);
    const identity = { model: 'team/served-name', grpc_address: `worker-b.example:${s.port}`, heartbeat_ms: 250 };
    // From the very first event: the flag is known at start, the engine is never asked.
    for (const event of events) expect(event).toMatchObject(identity);
    for (const r of w.got) expect(r.rank).toMatchObject(identity);
    expect((await s.get('/load')).body).toContain('"model":"team/served-name"');
    expect(s.stderr()).not.toContain('served model from the engine');
    expect(s.stderr()).toContain('"grpc_address":"worker-b.example:');
  });

  it('demo mode learns its model from the embedded engine the same way', async () => {
    const s = await sidecar(['--status-interval-ms', '0']);
    const ranks = async (): Promise<LoadEvent[]> => (JSON.parse((await s.get('/load')).body) as { ranks: LoadEvent[] }).ranks;
    await waitFor(async () => (await ranks())[0]?.model === 'simulated-model', 'the embedded engine model in /load', 10_000);
    const [rank] = await ranks();
    expect(rank).toMatchObject({ grpc_address: `127.0.0.1:${s.port}`, heartbeat_ms: 1000, engine_request: 0 });
  });
});
