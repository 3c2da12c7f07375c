/**
 * A sidecar started with --event-format dynamo publishes Dynamo's MessagePack envelopes on the
 * subject our frontend reads: the frontend's NATS source must treat them as malformed events
 * (counted, never applied, logged once per thousand), not crash or log each one.
 */
import { describe, expect, it } from 'vitest';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { NatsLoadSource } from '../../../../src/frontend/sources/nats-source.js';
import { DYNAMO_LOAD_TOPIC, encodeDynamoEnvelope } from '../../../../src/protocol/dynamo-event.js';
import { recordingLogger } from '../../../support/recording-logger.js';

describe('NATS load source and dynamo-format events', () => {
  it('counts each MessagePack envelope as invalid, applies none, and logs the first of each thousand', () => {
    const pool = new WorkerPool({ defaultHeartbeatMs: 1000, leaseMs: 1000, maxWorkers: 100 });
    const logger = recordingLogger();
    const nats = new NatsLoadSource({
      servers: ['nats://127.0.0.1:1'],
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
      pool,
      now: () => 0,
      logger,
    });
    for (let sequence = 0; sequence < 1500; sequence++) {
      const envelope = encodeDynamoEnvelope(
        { publisherId: 77, sequence, publishedAtMs: 1_796_213_000_000 + sequence, topic: DYNAMO_LOAD_TOPIC },
        { worker_id: 9, dp_rank: 0, active_decode_blocks: 3, active_prefill_tokens: 16, kv_used_blocks: null },
      );
      expect(() => nats.handle(envelope)).not.toThrow();
    }
    expect(nats.stats).toMatchObject({ events: 0, invalid: 1500, refused: 0 });
    expect(pool.size).toBe(0);
    expect(logger.find('ignoring a malformed load event', 'warn').map((l) => l.fields['invalid_so_far'])).toEqual([1, 1001]);
  });
});
