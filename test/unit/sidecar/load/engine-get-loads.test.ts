// GetLoads as a KV source: the SchedulerLoad -> ScrapedLoad rules, and the reader against a
// node:http2 server answering with bytes written here from the upstream field numbers (SMG's
// vllm_engine.proto and sglang_scheduler.proto), never produced by this project's .proto.
import { connect, createServer, type ClientHttp2Session, type Http2Server, type ServerHttp2Session } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { getLoadsReader, schedulerLoads } from '../../../../src/sidecar/load/engine-get-loads.js';
import { EngineScraper, LoadSourceUnsupportedError, ScrapeError } from '../../../../src/sidecar/load/engine-scraper.js';
import type { SchedulerLoadMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

// --- protobuf bytes by hand ---
const varint = (value: number): number[] => {
  let v = BigInt.asUintN(64, BigInt(value));
  const out: number[] = [];
  do {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? low | 0x80 : low);
  } while (v > 0n);
  return out;
};
const num = (field: number, value: number): number[] => [...varint(field << 3), ...varint(value)];
const len = (field: number, body: number[]): number[] => [...varint((field << 3) | 2), ...varint(body.length), ...body];
const str = (field: number, text: string): number[] => len(field, [...Buffer.from(text)]);
const double = (field: number, value: number): number[] => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(value);
  return [...varint((field << 3) | 1), ...b];
};

/** SMG sglang_scheduler.proto SchedulerLoad, with the fields vLLM lacks (17, optional sections 12-16). */
const sglangLoad = (rank: number, used: number, total: number, running: number, waiting: number): number[] =>
  len(4, [
    ...(rank ? num(1, rank) : []),
    ...num(2, running),
    ...num(3, waiting),
    ...num(4, running + waiting),
    ...num(5, used),
    ...num(6, total),
    ...double(7, used / total),
    ...double(8, 123.5),
    ...num(11, 256),
    ...len(12, [...double(1, 14.2), ...double(2, 60.1)]), // MemoryMetrics
    ...num(17, 99), // num_waiting_uncached_tokens
  ]);
const SGLANG_RESPONSE = Buffer.from([
  ...str(1, '2026-12-02T10:00:00Z'),
  ...str(2, '0.5.4'),
  ...num(3, 2),
  ...sglangLoad(0, 4096, 65536, 3, 1),
  ...sglangLoad(1, 1000, 65536, 1, 0),
  ...len(5, [...num(1, 4), ...num(2, 1)]), // AggregateMetrics
]);
/** What SMG's vLLM servicer sends: one rank, counts and token_usage only. */
const VLLM_RESPONSE = Buffer.from([
  ...str(1, '2026-12-02T10:00:00Z'),
  ...str(2, '0.11.0'),
  ...num(3, 1),
  ...len(4, [...num(2, 5), ...num(3, 2), ...num(4, 7), ...double(7, 0.25)]),
]);

type Answer = { body: Buffer } | { status: GrpcStatus; message: string };

async function fakeEngine(answer: () => Answer): Promise<{ session: ClientHttp2Session; paths: string[] }> {
  const server: Http2Server = createServer();
  const sessions = new Set<ServerHttp2Session>();
  const paths: string[] = [];
  server.on('session', (s) => {
    sessions.add(s);
    s.on('error', () => {});
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    paths.push(String(headers[':path']));
    stream.resume();
    stream.on('end', () => {
      const a = answer();
      if ('status' in a) {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(a.status), 'grpc-message': a.message }, { endStream: true });
        return;
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(frameMessage(a.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const session = connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  session.on('error', () => {});
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        session.destroy();
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { session, paths };
}

const load = (fields: Partial<SchedulerLoadMessage>): SchedulerLoadMessage => ({
  dp_rank: 0,
  num_running_reqs: 0,
  num_waiting_reqs: 0,
  num_total_reqs: 0,
  num_used_tokens: 0,
  max_total_num_tokens: 0,
  token_usage: 0,
  gen_throughput: 0,
  cache_hit_rate: 0,
  utilization: 0,
  max_running_requests: 0,
  ...fields,
});

describe('schedulerLoads', () => {
  it('token counts (SGLang, the simulated engine) give total and used blocks at the block size', () => {
    const { ranks, problems } = schedulerLoads(
      [load({ dp_rank: 1, num_used_tokens: 33, max_total_num_tokens: 1024, token_usage: 0.03, num_running_reqs: 2 })],
      16,
      undefined,
    );
    expect(problems).toEqual([]);
    expect(ranks.get(1)).toEqual({ kvTotalBlocks: 64, kvUsedBlocks: 3, kvUsagePerc: 0.03, running: 2, waiting: 0 });
  });

  it('a usage ratio only (vLLM) gives used blocks from --kv-total-blocks, and nothing in blocks without it', () => {
    expect(schedulerLoads([load({ token_usage: 0.25 })], 16, 2000).ranks.get(0)).toEqual({ kvUsagePerc: 0.25, kvUsedBlocks: 500, running: 0, waiting: 0 });
    expect(schedulerLoads([load({ token_usage: 0.25 })], 16, undefined).ranks.get(0)).toEqual({ kvUsagePerc: 0.25, running: 0, waiting: 0 });
  });

  it('skips negative ranks and ignores nonsense ratios and counts', () => {
    const { ranks, problems } = schedulerLoads(
      [load({ dp_rank: -1 }), load({ token_usage: 7, num_running_reqs: -3, num_used_tokens: -5, max_total_num_tokens: 64 })],
      16,
      10,
    );
    expect(problems).toEqual(['GetLoads entry with dp_rank -1 skipped']);
    expect(ranks.get(0)).toEqual({ kvTotalBlocks: 4, kvUsedBlocks: 0, running: 0, waiting: 0 });
  });
});

describe('getLoadsReader', () => {
  const readerFor = (session: ClientHttp2Session, wire: 'vllm' | 'sglang', kvTotalBlocks?: number) =>
    getLoadsReader({ open: (headers) => session.request(headers), wire, kvBlockSize: 16, kvTotalBlocks, timeoutMs: 2000 });

  it("reads SGLang's per-rank token counts from hand-encoded bytes, skipping the fields vLLM lacks", async () => {
    const engine = await fakeEngine(() => ({ body: SGLANG_RESPONSE }));
    const result = await readerFor(engine.session, 'sglang')(new AbortController().signal);
    expect(engine.paths).toEqual(['/sglang.grpc.scheduler.SglangScheduler/GetLoads']);
    expect(result.ranks.get(0)).toEqual({ kvTotalBlocks: 4096, kvUsedBlocks: 256, kvUsagePerc: 4096 / 65536, running: 3, waiting: 1 });
    expect(result.ranks.get(1)).toMatchObject({ kvTotalBlocks: 4096, kvUsedBlocks: 63, running: 1 });
  });

  it("reads vLLM's answer (token_usage only) on vLLM's path", async () => {
    const engine = await fakeEngine(() => ({ body: VLLM_RESPONSE }));
    const result = await readerFor(engine.session, 'vllm', 800)(new AbortController().signal);
    expect(engine.paths).toEqual(['/vllm.grpc.engine.VllmEngine/GetLoads']);
    expect(result.ranks.get(0)).toEqual({ kvUsagePerc: 0.25, kvUsedBlocks: 200, running: 5, waiting: 2 });
  });

  it('UNIMPLEMENTED means the engine has no GetLoads; other statuses and garbage are failed reads', async () => {
    let answer: Answer = { status: GrpcStatus.UNIMPLEMENTED, message: 'Method not found' };
    const engine = await fakeEngine(() => answer);
    const read = readerFor(engine.session, 'vllm');
    await expect(read(new AbortController().signal)).rejects.toBeInstanceOf(LoadSourceUnsupportedError);
    answer = { status: GrpcStatus.UNAVAILABLE, message: 'starting' };
    await expect(read(new AbortController().signal)).rejects.toThrow(ScrapeError);
    answer = { body: Buffer.from([0x22, 0x05, 0x08]) }; // loads entry longer than the message
    await expect(read(new AbortController().signal)).rejects.toThrow(/undecodable GetLoadsResponse/);
  });

  it('as an EngineScraper source: fresh values, then UNIMPLEMENTED stops polling for good with one warning', async () => {
    let answer: Answer = { body: SGLANG_RESPONSE };
    const engine = await fakeEngine(() => answer);
    const log = recordingLogger();
    let updates = 0;
    const poller = new EngineScraper({
      url: 'GetLoads',
      source: 'getloads',
      read: readerFor(engine.session, 'sglang'),
      intervalMs: 20,
      logger: log,
      onUpdate: () => updates++,
    });
    cleanups.push(() => poller.stop());
    poller.start();
    await waitFor(() => !poller.stale, 'a fresh GetLoads read');
    expect(poller.ranks.get(1)?.kvUsedBlocks).toBe(63);
    answer = { status: GrpcStatus.UNIMPLEMENTED, message: '' };
    await waitFor(() => poller.unsupported, 'GetLoads marked unsupported');
    poller.start(); // a restart must not ask again either
    const asked = engine.paths.length;
    const seenUpdates = updates;
    await new Promise((resolve) => setTimeout(resolve, 100)); // five intervals: nothing more may be asked
    expect(engine.paths.length).toBe(asked);
    expect(updates).toBe(seenUpdates);
    expect(poller.stale).toBe(true);
    expect(log.lines.filter((l) => l.level === 'warn' && /unsupported/.test(l.msg))).toHaveLength(1);
  });
});
