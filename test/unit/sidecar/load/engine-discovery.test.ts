/**
 * EngineDiscovery against an in-process HTTP/2 engine on a real socket, through a real
 * UpstreamPool: the facts of every question merged, the round complete when each is answered
 * (UNIMPLEMENTED warned once for the sidecar's lifetime), and a new round after the engine was
 * lost and came back, whose answers replace the old ones.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { EngineDiscovery } from '../../../../src/sidecar/load/engine-discovery.js';
import { UpstreamPool } from '../../../../src/sidecar/proxy/upstream.js';
import { startFakeEngineRpc, type FakeEngineRpc } from '../../../support/fake-engine-rpc.js';
import { bytes, msg, num, str } from '../../../support/proto-bytes.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

// vLLM's own ServerInfo: parallelism 4 {dp 3}, kv_block_size 6, total_kv_blocks 7, max_running_requests 8.
const serverInfo = (totalBlocks: number): Buffer => msg(bytes(4, num(3, 2)), num(6, 16), num(7, totalBlocks), num(8, 4));

async function engine(totalBlocks: number, port = 0, modelInfo = 'llama'): Promise<FakeEngineRpc> {
  // modelInfo 'unimplemented': the engine answers UNIMPLEMENTED.
  const e = await startFakeEngineRpc('/vllm.Control/GetServerInfo', () => ({ body: serverInfo(totalBlocks) }), port, {
    '/vllm.Control/GetModelInfo': modelInfo === 'unimplemented' ? { status: GrpcStatus.UNIMPLEMENTED } : { body: msg(str(2, modelInfo)) },
  });
  cleanups.push(() => e.close());
  return e;
}

function discover(port: number) {
  const pool = new UpstreamPool(
    { target: { host: '127.0.0.1', port }, reconnectMinMs: 20, reconnectMaxMs: 50, pingIntervalMs: 50, pingTimeoutMs: 200 },
    recordingLogger(),
  );
  pool.start();
  cleanups.push(() => pool.close());
  const log = recordingLogger();
  const discovery = new EngineDiscovery({ engine: pool, wire: 'vllm-native', logger: log, timeoutMs: 2000, retryMs: 20 });
  const heard: { complete: boolean; round: number; kvTotalBlocks: number | undefined }[] = [];
  discovery.onFacts((facts, round) => heard.push({ ...round, kvTotalBlocks: facts.kvTotalBlocks }));
  cleanups.push(() => discovery.stop());
  discovery.start();
  return { discovery, log, heard };
}

describe('EngineDiscovery', () => {
  it('merges every answer of the round and says when it is complete', async () => {
    const e = await engine(200);
    const { discovery, heard } = discover(e.port);
    await waitFor(() => discovery.complete, 'the round complete');
    expect(discovery.known).toEqual({ model: 'llama', kvBlockSize: 16, kvTotalBlocks: 100, maxRunningRequests: 8, dataParallelSize: 2 });
    expect(heard.map((h) => h.complete)).toEqual([false, true]);
    expect(discovery.rounds).toBe(1);
  });

  it('asks again after the engine was lost and came back, and takes the new answers', async () => {
    const first = await engine(200);
    const port = first.port;
    const { discovery, heard, log } = discover(port);
    await waitFor(() => discovery.complete, 'the first round complete');
    await first.close();
    // The restarted engine has another KV size, and no GetModelInfo.
    await waitFor(async () => {
      try {
        await engine(400, port, 'unimplemented');
        return true;
      } catch {
        return false; // the port is not free again yet
      }
    }, 'the engine restarted on its port');
    await waitFor(() => discovery.rounds === 2 && discovery.complete, 'the second round complete');
    expect(discovery.known.kvTotalBlocks).toBe(200);
    expect(discovery.known.model).toBe('llama'); // kept: the new engine did not tell
    expect(heard.filter((h) => h.complete).map((h) => h.round)).toEqual([1, 2]);
    expect(log.lines.filter((l) => l.level === 'warn' && l.msg.includes('does not implement Control/GetModelInfo'))).toHaveLength(1);
  });
});
