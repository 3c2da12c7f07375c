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
import { GET_LOADS_SGLANG, GET_LOADS_VLLM, msg, str } from '../../../support/proto-bytes.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

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

  it('puts each total in blocks to the range check as max_total_num_tokens, and leaves a refused one out', () => {
    const asked: unknown[] = [];
    const refuseHuge = (fact: string, field: string, value: number): number | undefined => {
      asked.push([fact, field, value]);
      return Number.isSafeInteger(value) && value > 0 ? value : undefined;
    };
    const loads = [
      load({ dp_rank: 0, max_total_num_tokens: 2 ** 63, token_usage: 0.5 }),
      load({ dp_rank: 1, max_total_num_tokens: -16 }),
      load({ dp_rank: 2 }),
    ];
    const { ranks } = schedulerLoads(loads, 16, 1000, refuseHuge);
    expect(asked).toEqual([
      ['kvTotalBlocks', 'max_total_num_tokens', 2 ** 59],
      ['kvTotalBlocks', 'max_total_num_tokens', -1],
    ]);
    expect(ranks.get(0)).toEqual({ kvUsagePerc: 0.5, kvUsedBlocks: 500, running: 0, waiting: 0 });
    expect(ranks.get(1)).not.toHaveProperty('kvTotalBlocks');
  });
});

describe('getLoadsReader', () => {
  const readerFor = (session: ClientHttp2Session, wire: 'vllm' | 'sglang' | 'sglang-native', kvTotalBlocks?: number) =>
    getLoadsReader({ open: (headers) => session.request(headers), wire, kvBlockSize: 16, kvTotalBlocks: () => kvTotalBlocks, timeoutMs: 2000 });

  it("reads SGLang's own GetLoad: json_info 1, a JSON array of per-rank objects; entries that are not objects are dropped, bad numbers read as not reported", async () => {
    const json = JSON.stringify([
      {
        dp_rank: 0,
        num_running_reqs: 3,
        num_waiting_reqs: 1,
        num_used_tokens: 4096,
        max_total_num_tokens: 65536,
        token_usage: 0.0625,
        max_running_requests: 128,
      },
      { dp_rank: 1, num_running_reqs: 'many', num_used_tokens: 1000, max_total_num_tokens: 65536 },
      'garbage',
    ]);
    const engine = await fakeEngine(() => ({ body: msg(str(1, json)) }));
    const result = await readerFor(engine.session, 'sglang-native')(new AbortController().signal);
    expect(engine.paths).toEqual(['/sglang.runtime.v1.SglangService/GetLoad']);
    expect(result.ranks.get(0)).toEqual({ kvTotalBlocks: 4096, kvUsedBlocks: 256, kvUsagePerc: 0.0625, running: 3, waiting: 1 });
    expect(result.ranks.get(1)).toMatchObject({ kvTotalBlocks: 4096, kvUsedBlocks: 63, running: 0 });
    const bad = await fakeEngine(() => ({ body: msg(str(1, '{"not":"an array"}')) }));
    await expect(readerFor(bad.session, 'sglang-native')(new AbortController().signal)).rejects.toThrow(/not a JSON array/);
  });

  it("reads SGLang's per-rank token counts from hand-encoded bytes, skipping the fields vLLM lacks", async () => {
    const engine = await fakeEngine(() => ({ body: GET_LOADS_SGLANG }));
    const result = await readerFor(engine.session, 'sglang')(new AbortController().signal);
    expect(engine.paths).toEqual(['/sglang.grpc.scheduler.SglangScheduler/GetLoads']);
    expect(result.ranks.get(0)).toEqual({ kvTotalBlocks: 4096, kvUsedBlocks: 256, kvUsagePerc: 4096 / 65536, running: 3, waiting: 1 });
    expect(result.ranks.get(1)).toMatchObject({ kvTotalBlocks: 4096, kvUsedBlocks: 63, running: 1 });
  });

  it("reads vLLM's answer (token_usage only) on vLLM's path", async () => {
    const engine = await fakeEngine(() => ({ body: GET_LOADS_VLLM }));
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
    let answer: Answer = { body: GET_LOADS_SGLANG };
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
