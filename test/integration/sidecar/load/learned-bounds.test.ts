/**
 * What an engine tells about its capacity is held to its flag's range, on every wire that carries
 * it: a real sidecar in front of a fake engine that reports 0, a negative number, 2^31-1, 2^53-1,
 * 2^63 or NaN (where its wire can carry them) for each capacity field. Whatever it said, the
 * sidecar stays alive, N and the budgets stay bounded, GET /admission minus `state` is a PUT the
 * sidecar accepts, and each field out of range is named in exactly one warning (not one per poll).
 */
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { ENGINE_PATHS } from '../../../../src/protocol/engine/generate-wire.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startFakeEngineRpc, type FakeEngineRpc, type RpcAnswer } from '../../../support/fake-engine-rpc.js';
import { bytes, msg, num, str } from '../../../support/proto-bytes.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { waitFor } from '../../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterAll(() => runCleanups(cleanups));

const TOKEN = 'learned-bounds-token-0123';
/** The flags' ranges (--data-parallel-size, --kv-block-size; the rest: any safe integer >= 1). */
const MAX_DP = 1024;
const MAX_BLOCK_SIZE = 2 ** 20;
const NEGATIVE = -1;
const VALUES_VARINT: readonly (number | bigint)[] = [0, NEGATIVE, 2 ** 31 - 1, 2 ** 53 - 1, 2n ** 63n];
/** An int32 field carries no more than 2^31-1. */
const VALUES_INT32: readonly number[] = [0, NEGATIVE, 2 ** 31 - 1];
/** JSON carries no NaN; 2^63 arrives as the double nearest it. */
const VALUES_JSON: readonly number[] = [0, NEGATIVE, 2 ** 31 - 1, 2 ** 53 - 1, 2 ** 63];

interface Field {
  /** The engine's name for it, as the warning must give it. */
  readonly name: string;
  readonly max: number;
}

/** Whether the value is outside the field's range; 0 is what proto3 sends for "not set", so it is "not told" on every wire. */
function outOfRange(value: number | bigint, field: Field): boolean {
  const v = Number(value);
  return v !== 0 && !(Number.isSafeInteger(v) && v >= 1 && v <= field.max);
}

/** Runs the cases side by side and reports every one that failed, not only the first. */
async function everyCase(cases: readonly Promise<void>[]): Promise<void> {
  const outcomes = await Promise.allSettled(cases);
  expect(outcomes.flatMap((o) => (o.status === 'rejected' ? [(o.reason as Error).message] : []))).toEqual([]);
}

/** Each field gets each value once over `values.length` engines (a Latin square), so a few sidecars cover every pair. */
function rotations<T>(fields: readonly Field[], values: readonly T[]): Map<string, T>[] {
  return values.map((_, i) => new Map(fields.map((field, j) => [field.name, values[(i + j) % values.length]!])));
}

/** A sidecar in front of `engine`; a small heap, so that a regression dies fast instead of filling the machine. */
async function sidecarFor(engine: FakeEngineRpc, wire: string, extra: string[] = []): Promise<SidecarProcess> {
  const sidecar = await startSidecarProcess(
    ['--upstream', `127.0.0.1:${engine.port}`, '--generate-wire', wire, '--engine-request-limit', 'auto', '--admin-token', TOKEN, ...extra],
    { NODE_OPTIONS: '--max-old-space-size=256' },
  );
  cleanups.push(() => sidecar.stop('SIGKILL'));
  return sidecar;
}

async function startEngine(path: string, answer: (n: number) => RpcAnswer, others: Record<string, RpcAnswer> = {}): Promise<FakeEngineRpc> {
  const engine = await startFakeEngineRpc(path, answer, 0, others);
  cleanups.push(() => engine.close());
  return engine;
}

/** The sidecar's JSON log lines at warn level that name `field` as the engine's. */
function warningsNaming(sidecar: SidecarProcess, field: string): number {
  return sidecar
    .stderr()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry['level'] === 'warn' && entry['engine_field'] === field).length;
}

const logged = (sidecar: SidecarProcess, text: string): boolean => sidecar.stderr().includes(text);

interface LoadBody {
  ranks: { kv_total_blocks: number | null; engine_request_limit: number | null; max_num_batched_tokens: number | null }[];
}

const bounded = (v: number | null): boolean => v === null || (Number.isSafeInteger(v) && v >= 1);

/** Alive, N and the budgets bounded, and GET /admission minus state accepted back by PUT. */
async function expectBounded(sidecar: SidecarProcess, what: string): Promise<void> {
  expect(sidecar.proc.exitCode, `${what}: exit code`).toBeNull();
  expect(sidecar.proc.signalCode, `${what}: signal`).toBeNull();
  const load = JSON.parse((await sidecar.get('/load')).body) as LoadBody;
  expect(load.ranks.length, `${what}: ranks`).toBeGreaterThanOrEqual(1);
  expect(load.ranks.length, `${what}: ranks`).toBeLessThanOrEqual(MAX_DP);
  for (const rank of load.ranks) {
    expect(bounded(rank.kv_total_blocks), `${what}: kv_total_blocks ${rank.kv_total_blocks}`).toBe(true);
    expect(bounded(rank.engine_request_limit), `${what}: engine_request_limit ${rank.engine_request_limit}`).toBe(true);
    expect(bounded(rank.max_num_batched_tokens), `${what}: max_num_batched_tokens ${rank.max_num_batched_tokens}`).toBe(true);
  }
  expect(Number.isSafeInteger(await sidecar.metric('dynamo_sidecar_engine_request_limit')), `${what}: N`).toBe(true);
  const url = `http://127.0.0.1:${sidecar.systemPort}/admission`;
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const got = (await (await fetch(url, { headers })).json()) as Record<string, unknown>;
  const { state, ...settings } = got;
  expect((state as { engine_request_limit_in_force: number }).engine_request_limit_in_force, `${what}: N in force`).toSatisfy(Number.isSafeInteger);
  const put = await fetch(url, { method: 'PUT', headers, body: JSON.stringify(settings) });
  expect(put.status, `${what}: PUT of GET's settings: ${await put.clone().text()}`).toBe(200);
}

/** Every field out of range in `values` named once, the others never. */
function expectWarnings(sidecar: SidecarProcess, fields: readonly Field[], values: ReadonlyMap<string, number | bigint>, what: string): void {
  for (const field of fields) {
    const value = values.get(field.name)!;
    expect(warningsNaming(sidecar, field.name), `${what}: warnings naming ${field.name} = ${value}`).toBe(outOfRange(value, field) ? 1 : 0);
  }
}

describe('capacity learned at discovery (asked once per connection)', () => {
  it("SMG's vLLM GetLoads: dp_rank_count and each rank's max_running_requests", async () => {
    const fields: Field[] = [
      { name: 'dp_rank_count', max: MAX_DP },
      { name: 'max_running_requests', max: Number.MAX_SAFE_INTEGER },
    ];
    const paths = ENGINE_PATHS.vllm;
    await everyCase(
      rotations(fields, VALUES_INT32).map(async (values) => {
        const answer = msg(num(3, values.get('dp_rank_count')!), bytes(4, num(11, values.get('max_running_requests')!)));
        const engine = await startEngine(paths.loads!, () => ({ body: answer }), { [paths.modelInfo]: { body: msg(str(6, 'm')) } });
        const sidecar = await sidecarFor(engine, 'vllm', ['--engine-load-source', 'traffic']);
        const what = JSON.stringify(Object.fromEntries(values));
        await waitFor(() => logged(sidecar, 'engine facts from GetLoads'), `${what}: the GetLoads answer read`);
        await expectBounded(sidecar, what);
        expectWarnings(sidecar, fields, values, what);
      }),
    );
  });

  it("vLLM's own Control/GetServerInfo: dp size, KV block size and blocks, max_num_seqs, max batched tokens", async () => {
    const fields: Field[] = [
      { name: 'data_parallel_size', max: MAX_DP },
      { name: 'kv_block_size', max: MAX_BLOCK_SIZE },
      { name: 'total_kv_blocks', max: Number.MAX_SAFE_INTEGER },
      { name: 'max_running_requests', max: Number.MAX_SAFE_INTEGER },
      { name: 'max_batched_tokens', max: Number.MAX_SAFE_INTEGER },
    ];
    const paths = ENGINE_PATHS['vllm-native'];
    await everyCase(
      rotations(fields, VALUES_VARINT).map(async (values) => {
        const v = (name: string): number | bigint => values.get(name)!;
        // ServerInfo: parallelism 4 {data_parallel_size 3}, kv_block_size 6, total_kv_blocks 7, max_running_requests 8, max_batched_tokens 9.
        const answer = msg(
          bytes(4, num(3, v('data_parallel_size'))),
          num(6, v('kv_block_size')),
          num(7, v('total_kv_blocks')),
          num(8, v('max_running_requests')),
          num(9, v('max_batched_tokens')),
        );
        const engine = await startEngine(paths.serverInfo!, () => ({ body: answer }), { [paths.modelInfo]: { body: msg(str(2, 'm')) } });
        const sidecar = await sidecarFor(engine, 'vllm-native');
        const what = JSON.stringify(Object.fromEntries([...values].map(([k, x]) => [k, String(x)])));
        await waitFor(() => logged(sidecar, 'engine facts from Control/GetServerInfo'), `${what}: the GetServerInfo answer read`);
        await expectBounded(sidecar, what);
        expectWarnings(sidecar, fields, values, what);
      }),
    );
  });

  it("SGLang's own GetServerInfo: dp_size, page_size, max_total_num_tokens, max_running_requests, max_prefill_tokens", async () => {
    const fields: Field[] = [
      { name: 'dp_size', max: MAX_DP },
      { name: 'page_size', max: MAX_BLOCK_SIZE },
      { name: 'max_total_num_tokens', max: Number.MAX_SAFE_INTEGER },
      { name: 'max_running_requests', max: Number.MAX_SAFE_INTEGER },
      { name: 'max_prefill_tokens', max: Number.MAX_SAFE_INTEGER },
    ];
    const paths = ENGINE_PATHS['sglang-native'];
    await everyCase(
      rotations(fields, VALUES_JSON).map(async (values) => {
        const info = { served_model_name: 'm', enable_dp_attention: true, ...Object.fromEntries(values) };
        const engine = await startEngine(paths.serverInfo!, () => ({ body: msg(str(1, JSON.stringify(info))) }));
        const sidecar = await sidecarFor(engine, 'sglang-native', ['--engine-load-source', 'traffic']);
        const what = JSON.stringify(Object.fromEntries(values));
        await waitFor(() => logged(sidecar, 'engine facts from GetServerInfo'), `${what}: the GetServerInfo answer read`);
        await expectBounded(sidecar, what);
        expectWarnings(sidecar, fields, values, what);
      }),
    );
  });
});

/** Polls per value: enough to see that a value kept out of range warns once, not once per poll. */
const POLLS_PER_VALUE = 3;
const POLL_MS = '20';

describe('capacity read on every poll', () => {
  it("SGLang's own GetLoad: each rank's max_total_num_tokens, one value after another", async () => {
    const paths = ENGINE_PATHS['sglang-native'];
    const values = VALUES_JSON.filter((v) => v !== 0);
    const rank = (tokens: number): string =>
      JSON.stringify([{ dp_rank: 0, num_running_reqs: 0, num_waiting_reqs: 0, num_used_tokens: 0, token_usage: 0, max_total_num_tokens: tokens }]);
    const info = { served_model_name: 'm', page_size: 16, max_total_num_tokens: 16_000, max_running_requests: 4 };
    const engine = await startEngine(
      paths.loads!,
      (n) => ({ body: msg(str(1, rank(values[Math.min(values.length - 1, Math.floor((n - 1) / POLLS_PER_VALUE))]!))) }),
      { [paths.serverInfo!]: { body: msg(str(1, JSON.stringify(info))) } },
    );
    const sidecar = await sidecarFor(engine, 'sglang-native', ['--engine-load-source', 'getloads', '--scrape-interval-ms', POLL_MS]);
    await waitFor(() => engine.calls > values.length * POLLS_PER_VALUE, 'every value polled');
    await expectBounded(sidecar, 'GetLoad');
    expect(warningsNaming(sidecar, 'max_total_num_tokens'), 'warnings naming max_total_num_tokens').toBe(1);
  });

  it("vLLM's /metrics: cache_config_info's num_gpu_blocks and block_size, one value after another", async () => {
    const values = ['-1', '2147483647', '9007199254740991', '9223372036854775808', 'NaN', '0'];
    let scrapes = 0;
    const metrics: Server = createServer((_req, res) => {
      const i = Math.min(values.length - 1, Math.floor(scrapes++ / POLLS_PER_VALUE));
      const blocks = values[i]!;
      const blockSize = values[(i + 1) % values.length]!;
      res.end(
        [
          'vllm:kv_cache_usage_perc 0.5',
          `vllm:cache_config_info{block_size="${blockSize}",num_gpu_blocks="${blocks}"} 1`,
          'vllm:num_requests_running 0',
          'vllm:num_requests_waiting 0',
          '',
        ].join('\n'),
      );
    });
    await new Promise<void>((resolve) => metrics.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => metrics.close(resolve)));
    const paths = ENGINE_PATHS.vllm;
    const engine = await startEngine(paths.loads!, () => ({ body: msg(num(3, 1), bytes(4, num(11, 4))) }), { [paths.modelInfo]: { body: msg(str(6, 'm')) } });
    const url = `http://127.0.0.1:${(metrics.address() as { port: number }).port}/metrics`;
    const sidecar = await sidecarFor(engine, 'vllm', ['--engine-metrics-url', url, '--scrape-interval-ms', POLL_MS]);
    await waitFor(() => scrapes > values.length * POLLS_PER_VALUE, 'every value scraped');
    await expectBounded(sidecar, '/metrics');
    expect(warningsNaming(sidecar, 'vllm:cache_config_info{num_gpu_blocks}'), 'warnings naming num_gpu_blocks').toBe(1);
    expect(warningsNaming(sidecar, 'vllm:cache_config_info{block_size}'), 'warnings naming block_size').toBe(1);
  });
});
