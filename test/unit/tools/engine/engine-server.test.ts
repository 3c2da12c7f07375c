// EngineServer's grpc-js wiring on 127.0.0.1:0, over a fake EngineCore and an injected clock:
// what each RPC hands the core and answers from it, the statuses it maps (INVALID_ARGUMENT,
// the sink's fail), client cancels, grpc.health.v1 (Check, List, Watch) and close(). The engine
// behind it is in engine-core.test.ts; the whole engine over gRPC in test/integration/tools/engine/.
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import type { GenerateRequestMessage, GenerateResponseMessage, SchedulerLoadMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import type { EngineCore, GenerateCall, GenerateCallContext, GenerateSink } from '../../../../src/tools/engine/engine-core.js';
import { EngineServer } from '../../../../src/tools/engine/engine-server.js';
import { resolveEngineOptions } from '../../../../src/tools/engine/options.js';
import { InvalidRequestError } from '../../../../src/tools/engine/request.js';
import { engineClient, generate, healthClient, startGenerate, unary } from '../../../support/vllm-client.js';

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
}
function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

interface Started {
  request: GenerateRequestMessage;
  context: GenerateCallContext;
  sink: GenerateSink;
  cancelled: Deferred<void>;
}

/** The parts of EngineCore the server uses; `onGenerate` decides what each call does. */
class FakeCore {
  readonly ranks = [{}, {}];
  activeCalls = 0;
  readonly aborted: string[][] = [];
  readonly loadsAsked: (number | null | undefined)[] = [];
  readonly failed: { code: GrpcStatus; details: string }[] = [];
  readonly started: Started[] = [];
  private waiting: Deferred<Started>[] = [];
  onGenerate: (call: Started) => void = () => {};
  /** Whether failAll ends the open calls (as the real core does). */
  failEnds = true;

  generate(request: GenerateRequestMessage, context: GenerateCallContext, sink: GenerateSink): GenerateCall {
    const call: Started = { request, context, sink, cancelled: deferred() };
    this.started.push(call);
    this.onGenerate(call);
    this.waiting.shift()?.resolve(call);
    return { rank: 0, cancel: () => call.cancelled.resolve() };
  }

  /** The next Generate call the core receives. */
  next(): Promise<Started> {
    const d = deferred<Started>();
    this.waiting.push(d);
    return d.promise;
  }

  abort(ids: Iterable<string>): number {
    this.aborted.push([...ids]);
    return 0;
  }

  loads(dpRank?: number | null): SchedulerLoadMessage[] {
    this.loadsAsked.push(dpRank);
    if (dpRank === 7) throw new InvalidRequestError('dp_rank 7 is out of range [0, 2) (data parallel size 2)');
    return [
      {
        dp_rank: 0,
        num_running_reqs: 3,
        num_waiting_reqs: 1,
        num_total_reqs: 4,
        num_used_tokens: 64,
        max_total_num_tokens: 1024,
        token_usage: 0.0625,
        gen_throughput: 0,
        cache_hit_rate: 0,
        utilization: 0,
        max_running_requests: 8,
      },
    ];
  }

  serverInfoCounts() {
    return { num_running: 3, num_waiting: 1, kv_used_blocks: 4, kv_total_blocks: 64 };
  }

  failAll(code: GrpcStatus, details: string): void {
    this.failed.push({ code, details });
    if (this.failEnds) for (const call of this.started) call.sink.fail(code, details);
  }
}

const options = resolveEngineOptions({ numGpuBlocks: 64, blockSize: 16, maxNumSeqs: 8, maxNumBatchedTokens: 512, modelName: 'sim-x', vocabSize: 500 });

let server: EngineServer | undefined;
const clients: grpc.Client[] = [];

async function setup(now = { ms: 1_000_000 }) {
  const core = new FakeCore();
  server = new EngineServer({ options, core: core as unknown as EngineCore, now: () => now.ms });
  const port = await server.bind('127.0.0.1', 0);
  const client = engineClient(`127.0.0.1:${port}`);
  const health = healthClient(`127.0.0.1:${port}`);
  clients.push(client, health);
  return { core, client, health, now, port, server };
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await server?.close(0);
  server = undefined;
});

const chunk = (ids: number[]): GenerateResponseMessage => ({ chunk: { token_ids: ids, prompt_tokens: 2, completion_tokens: ids.length, cached_tokens: 0 } });
const complete = (ids: number[]): GenerateResponseMessage => ({
  complete: { output_ids: ids, finish_reason: 'length', prompt_tokens: 2, completion_tokens: ids.length, cached_tokens: 0 },
});

describe('EngineServer.bind', () => {
  it('binds a free port for port 0', async () => {
    const { port } = await setup();
    expect(port).toBeGreaterThan(0);
  });

  it('rejects when the port is taken', async () => {
    const { port } = await setup();
    const other = new EngineServer({ options, core: new FakeCore() as unknown as EngineCore });
    try {
      await expect(other.bind('127.0.0.1', port)).rejects.toThrow();
    } finally {
      await other.close(0);
    }
  });
});

describe('EngineServer Generate', () => {
  it("writes the sink's messages in order and ends OK at the sink's end", async () => {
    const { core, client } = await setup();
    core.onGenerate = ({ sink }) => {
      sink.write(chunk([5]));
      sink.write(chunk([6]));
      sink.write(complete([6]));
      sink.end();
    };
    const out = await generate(client, { request_id: 'r1', tokenized: { input_ids: [1, 2] }, stream: true });
    expect(out.code).toBe(grpc.status.OK);
    expect(out.messages.map((m) => m.chunk?.token_ids ?? m.complete?.output_ids)).toEqual([[5], [6], [6]]);
    expect(out.messages[2]?.complete?.finish_reason).toBe('length');
    expect(core.started[0]!.request).toMatchObject({ request_id: 'r1', tokenized: { input_ids: [1, 2] }, stream: true });
  });

  it("ends with the sink's failure status and details", async () => {
    const { core, client } = await setup();
    core.onGenerate = ({ sink }) => sink.fail(GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded');
    expect(await generate(client, { request_id: 'r', text: 'x', stream: true })).toMatchObject({
      code: grpc.status.DEADLINE_EXCEEDED,
      details: 'deadline exceeded',
      messages: [],
    });
  });

  it('answers INVALID_ARGUMENT with the message of a refused request', async () => {
    const { core, client } = await setup();
    core.onGenerate = () => {
      throw new InvalidRequestError('prompt is empty: set tokenized.input_ids or a non-blank text');
    };
    expect(await generate(client, { request_id: 'r', stream: true })).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'prompt is empty: set tokenized.input_ids or a non-blank text',
    });
  });

  it('hands the core the x-data-parallel-rank metadata as a string, and no timeout without a deadline', async () => {
    const { core, client } = await setup();
    core.onGenerate = ({ sink }) => sink.end();
    const metadata = new grpc.Metadata();
    metadata.set('x-data-parallel-rank', '1');
    const call = (client as unknown as { Generate: (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<unknown> }).Generate(
      { request_id: 'r', text: 'x', stream: true },
      metadata,
    );
    call.on('data', () => {});
    call.on('error', () => {});
    const started = await core.next();
    expect(started.context.metadataRank).toBe('1');
    expect(started.context.timeoutMs).toBe(Number.POSITIVE_INFINITY);
    await generate(client, { request_id: 'r2', text: 'x', stream: true });
    expect(core.started[1]!.context.metadataRank).toBeUndefined();
  });

  it("hands the core the time left until the call's deadline", async () => {
    const { core, client } = await setup();
    core.onGenerate = ({ sink }) => sink.end();
    await generate(client, { request_id: 'r', text: 'x', stream: true }, { deadline: Date.now() + 30_000 });
    const timeoutMs = core.started[0]!.context.timeoutMs!;
    expect(timeoutMs).toBeGreaterThan(25_000);
    expect(timeoutMs).toBeLessThanOrEqual(30_000);
  });

  it('cancels the core call when the client cancels', async () => {
    const { core, client } = await setup();
    const call = startGenerate(client, { request_id: 'r', text: 'x', stream: true });
    call.on('error', () => {});
    const started = await core.next();
    call.cancel();
    await started.cancelled.promise;
  });
});

describe('EngineServer management RPCs', () => {
  it('HealthCheck answers healthy', async () => {
    const { client } = await setup();
    expect(await unary(client, 'HealthCheck')).toEqual({ healthy: true, message: 'ok' });
  });

  it('Abort hands the core the request ids, none when the field is empty', async () => {
    const { core, client } = await setup();
    expect(await unary(client, 'Abort', { request_ids: ['a', 'b'] })).toEqual({});
    expect(await unary(client, 'Abort', {})).toEqual({});
    expect(core.aborted).toEqual([['a', 'b'], []]);
  });

  it('GetModelInfo reports the model and the KV geometry of the options, the context as its effective length', async () => {
    const { client } = await setup();
    expect(await unary(client, 'GetModelInfo')).toMatchObject({
      model_path: 'sim-x',
      is_generation: true,
      max_context_length: 64 * 16,
      vocab_size: 500,
      supports_vision: false,
      num_gpu_blocks: 64,
      block_size: 16,
      max_num_seqs: 8,
      max_num_batched_tokens: 512,
    });
  });

  it('GetServerInfo reports uptime and the last Generate by the injected clock, and the core counts', async () => {
    const { core, client, now } = await setup({ ms: 1_000_000 });
    expect(await unary(client, 'GetServerInfo')).toMatchObject({ last_receive_timestamp: 0, uptime_seconds: 0 });
    core.onGenerate = ({ sink }) => sink.end();
    now.ms = 1_002_500;
    await generate(client, { request_id: 'r', text: 'x', stream: true });
    now.ms = 1_004_000;
    core.activeCalls = 2;
    expect(await unary(client, 'GetServerInfo')).toMatchObject({
      active_requests: 2,
      is_paused: false,
      last_receive_timestamp: 1002.5,
      uptime_seconds: 4,
      server_type: 'simulated-vllm-grpc',
      data_parallel_size: 2,
      num_running: 3,
      num_waiting: 1,
      kv_used_blocks: 4,
      kv_total_blocks: 64,
    });
  });

  it('GetLoads answers the core loads with the time, version and rank count; a bad rank is INVALID_ARGUMENT', async () => {
    const { core, client } = await setup({ ms: Date.parse('2026-01-05T10:00:00.250Z') });
    const answer = await unary<Record<string, unknown>>(client, 'GetLoads', {});
    expect(answer).toMatchObject({ timestamp: '2026-01-05T10:00:00.250Z', version: 'simulated', dp_rank_count: 2 });
    expect(answer['loads']).toEqual([expect.objectContaining({ num_running_reqs: 3, num_used_tokens: 64, token_usage: 0.0625 })]);
    await unary(client, 'GetLoads', { dp_rank: 1 });
    expect(core.loadsAsked.at(-1)).toBe(1);
    await expect(unary(client, 'GetLoads', { dp_rank: 7 })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'dp_rank 7 is out of range [0, 2) (data parallel size 2)',
    });
  });
});

describe('EngineServer grpc.health.v1', () => {
  it('Check answers SERVING for the server and for VllmEngine, NOT_FOUND naming any other service', async () => {
    const { health } = await setup();
    expect(await unary(health, 'Check', { service: '' })).toEqual({ status: 'SERVING' });
    expect(await unary(health, 'Check', { service: 'vllm.grpc.engine.VllmEngine' })).toEqual({ status: 'SERVING' });
    await expect(unary(health, 'Check', { service: 'other.Service' })).rejects.toMatchObject({
      code: grpc.status.NOT_FOUND,
      details: "unknown service 'other.Service'",
    });
  });

  it('List names both services as SERVING', async () => {
    const { health } = await setup();
    expect(await unary(health, 'List', {})).toEqual({
      statuses: { '': { status: 'SERVING' }, 'vllm.grpc.engine.VllmEngine': { status: 'SERVING' } },
    });
  });

  it('Watch sends the status at once, then NOT_SERVING and the end of the stream at close', async () => {
    const { health, server } = await setup();
    const watch = (health as unknown as { Watch: (r: unknown) => grpc.ClientReadableStream<{ status: string }> }).Watch({ service: '' });
    const statuses: string[] = [];
    const first = deferred<void>();
    watch.on('data', (m: { status: string }) => {
      statuses.push(m.status);
      first.resolve();
    });
    watch.on('error', () => {});
    const ended = new Promise<grpc.StatusObject>((resolve) => watch.on('status', resolve));
    await first.promise;
    expect(statuses).toEqual(['SERVING']);
    await server.close(1000);
    expect((await ended).code).toBe(grpc.status.OK);
    expect(statuses).toEqual(['SERVING', 'NOT_SERVING']);
  });

  it('Watch of an unknown service answers SERVICE_UNKNOWN', async () => {
    const { health } = await setup();
    const watch = (health as unknown as { Watch: (r: unknown) => grpc.ClientReadableStream<{ status: string }> }).Watch({ service: 'nope' });
    watch.on('error', () => {});
    const status = await new Promise<string>((resolve) => watch.on('data', (m: { status: string }) => resolve(m.status)));
    watch.cancel();
    expect(status).toBe('SERVICE_UNKNOWN');
  });
});

describe('EngineServer.close', () => {
  it('ends in-flight calls through the core with UNAVAILABLE', async () => {
    const { core, client, server } = await setup();
    const pending = generate(client, { request_id: 'r', text: 'x', stream: true });
    await core.next();
    await server.close(5000);
    expect(core.failed).toEqual([{ code: GrpcStatus.UNAVAILABLE, details: 'simulated engine shutting down' }]);
    expect(await pending).toMatchObject({ code: grpc.status.UNAVAILABLE, details: 'simulated engine shutting down' });
  });

  it('forces the shutdown after the grace when a call is still open', async () => {
    const { core, client, server } = await setup();
    core.failEnds = false;
    const pending = generate(client, { request_id: 'r', text: 'x', stream: true });
    await core.next();
    await server.close(0);
    expect((await pending).code).not.toBe(grpc.status.OK);
  });
});
