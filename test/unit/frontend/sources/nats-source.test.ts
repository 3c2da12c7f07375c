import { describe, expect, it } from 'vitest';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { NatsLoadSource } from '../../../../src/frontend/sources/nats-source.js';
import { recordingLogger } from '../../../support/recording-logger.js';

function source(maxWorkers = 100) {
  const pool = new WorkerPool({ defaultHeartbeatMs: 1000, leaseMs: 1000, maxWorkers });
  const logger = recordingLogger();
  const nats = new NatsLoadSource({
    servers: ['nats://127.0.0.1:1'],
    namespace: 'my.ns',
    component: 'backend',
    endpoint: 'generate',
    pool,
    now: () => 0,
    logger,
  });
  const send = (value: unknown): void => nats.handle(Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)));
  return { pool, logger, nats, send };
}

describe('NATS load source', () => {
  it("subscribes to the sidecars' subject, escaped the same way", () => {
    expect(source().nats.subject).toBe('namespace.my%2Ens.component.backend.endpoint.generate.kv_metrics');
  });

  it('applies each event to the pool: a worker appears with its first event, with its address and model', () => {
    const { pool, send, logger } = source();
    send({ worker_id: 9, dp_rank: 0, active_decode_blocks: 3, kv_total_blocks: 64, model: 'm', grpc_address: '127.0.0.1:50050', heartbeat_ms: 250 });
    send({ worker_id: 9, dp_rank: 1, active_decode_blocks: 5, kv_total_blocks: 64, model: 'm', grpc_address: '127.0.0.1:50050', heartbeat_ms: 250 });
    const worker = pool.get('9')!;
    expect({ address: worker.address, model: worker.model, heartbeatMs: worker.heartbeatMs, ranks: [...worker.ranks.keys()] }).toEqual({
      address: '127.0.0.1:50050',
      model: 'm',
      heartbeatMs: 250,
      ranks: [0, 1],
    });
    expect(logger.find('worker appeared')).toHaveLength(1);
  });

  it('counts malformed events, never applies them, and logs the first of a run rather than each', () => {
    const { pool, send, nats, logger } = source();
    send('not json');
    send({ worker_id: 'x' });
    send({ worker_id: 1, active_prefill_tokens: -1 });
    expect(pool.size).toBe(0);
    expect(nats.stats).toMatchObject({ events: 0, invalid: 3 });
    expect(logger.find('ignoring a malformed load event')).toHaveLength(1);
  });

  it('reads predicted_ttft_ms into the rank; a hostile one reads as unknown and the event is still applied with the rest of its load', () => {
    const { pool, send, nats } = source();
    const prediction = () => pool.get('4')!.ranks.get(0)!.report.predictedTtftMs;
    send({ worker_id: 4, active_prefill_tokens: 3, predicted_ttft_ms: 180 });
    expect(prediction()).toBe(180);
    const hostile: unknown[] = [-1, 1e300, 'NaN', '1e3', { a: 1 }, [], true, null];
    for (const [i, value] of hostile.entries()) {
      send({ worker_id: 4, active_prefill_tokens: 10 + i, predicted_ttft_ms: value });
      expect(prediction(), JSON.stringify(value)).toBeUndefined();
      expect(pool.get('4')!.ranks.get(0)!.report.activePrefillTokens).toBe(10 + i);
    }
    // JSON itself has no NaN or Infinity: a hand-written one is not JSON at all, so the whole event is malformed.
    send('{"worker_id":4,"predicted_ttft_ms":NaN}');
    expect(nats.stats).toMatchObject({ events: 1 + hostile.length, invalid: 1 });
    send({ worker_id: 4 });
    expect(prediction()).toBeUndefined();
  });

  it('refuses events from new workers beyond --max-workers, counted and logged once, while known workers keep reporting', () => {
    const { pool, send, nats, logger } = source(2);
    for (let id = 1; id <= 50; id++) send({ worker_id: id, active_decode_blocks: 1, model: 'm', grpc_address: '127.0.0.1:1' });
    expect(pool.size).toBe(2);
    expect(nats.stats).toMatchObject({ events: 2, refused: 48 });
    expect(logger.find('ignoring a load event: the worker limit is reached')).toHaveLength(1);
    send({ worker_id: 1, active_decode_blocks: 7 });
    expect(pool.get('1')!.ranks.get(0)!.report.activeDecodeBlocks).toBe(7);
  });

  it('refuses ranks of a worker beyond 1,024, counted, with one warning per worker', () => {
    const { pool, send, nats, logger } = source();
    for (const id of [1, 2]) for (let rank = 0; rank < 1100; rank++) send({ worker_id: id, dp_rank: rank, model: 'm', grpc_address: '127.0.0.1:1' });
    expect(pool.get('1')!.ranks.size).toBe(1024);
    expect(pool.get('2')!.ranks.size).toBe(1024);
    expect(nats.stats).toMatchObject({ events: 2 * 1024, refused: 0, ranksRefused: 2 * 76 });
    const warnings = logger.find('ignoring dp ranks: more ranks than a worker may have', 'warn');
    expect(warnings.map((line) => line.fields['worker_id'])).toEqual(['1', '2']);
    expect(warnings[0]!.fields).toMatchObject({ max_ranks: 1024, source: 'nats' });
  });
});
