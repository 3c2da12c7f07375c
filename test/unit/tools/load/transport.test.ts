// The gRPC transport of the load client, with startAttempt replaced by a recorder: the requests it
// draws (ids, lengths in range, token ids in the vocabulary), drawn at prepare time from the run's
// seeded stream, reused by retries; plus draw() and LoadSetupError.
import * as grpc from '@grpc/grpc-js';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import type { GenerateRequestMessage } from '../../../../src/protocol/engine/engine-proto.js';
import type { RunningAttempt } from '../../../../src/tools/load/attempt.js';
import { resolveLoadOptions, type LoadOptions } from '../../../../src/tools/load/options.js';
import { LoadRecorder } from '../../../../src/tools/load/stats.js';
import { classHeaders, draw, grpcTransport, LoadSetupError } from '../../../../src/tools/load/transport.js';

interface Started {
  client: grpc.Client;
  request: GenerateRequestMessage;
  deadlineMs: number | undefined;
  recorder: LoadRecorder;
  metadata: Record<string, string>;
}

const started = vi.hoisted(() => [] as unknown[]);

vi.mock('../../../../src/tools/load/attempt.js', () => ({
  startAttempt: (client: unknown, request: unknown, deadlineMs: unknown, recorder: unknown, metadata: unknown): RunningAttempt => {
    started.push({ client, request, deadlineMs, recorder, metadata });
    return { done: new Promise(() => {}), cancel: () => {} };
  },
}));

beforeEach(() => {
  started.length = 0;
});

const options = (over: Partial<LoadOptions> = {}): LoadOptions => resolveLoadOptions({ target: '127.0.0.1:1', seed: 9, ...over });
const last = (): Started => started[started.length - 1] as Started;

function requestsOf(over: Partial<LoadOptions>, indexes: number[], order = indexes): GenerateRequestMessage[] {
  const transport = grpcTransport(options(over), mulberry32(options(over).seed), new LoadRecorder());
  const starts = new Map(indexes.map((index) => [index, transport.prepare(index)]));
  const requests = new Map<number, GenerateRequestMessage>();
  for (const index of order) {
    starts.get(index)!();
    requests.set(index, last().request);
  }
  transport.close();
  return indexes.map((index) => requests.get(index)!);
}

describe('draw', () => {
  it('is uniform over the inclusive range: the lowest draw gives MIN, the highest MAX', () => {
    expect(draw({ min: 3, max: 7 }, () => 0)).toBe(3);
    expect(draw({ min: 3, max: 7 }, () => 0.999_999)).toBe(7);
    expect(draw({ min: 3, max: 7 }, () => 0.5)).toBe(5);
    expect(draw({ min: 4, max: 4 }, () => 0.999)).toBe(4);
  });

  it('reaches every value of the range and nothing outside it', () => {
    const random = mulberry32(1);
    const seen = new Set<number>();
    for (let i = 0; i < 500; i++) seen.add(draw({ min: 1, max: 5 }, random));
    expect([...seen].sort()).toEqual([1, 2, 3, 4, 5]);
  });
});

describe('classHeaders', () => {
  it('names each part of the class that is set, priority 0 included', () => {
    expect(classHeaders({ priority: undefined, tenant: undefined })).toEqual({});
    expect(classHeaders({ priority: 0, tenant: undefined })).toEqual({ 'x-request-priority': '0' });
    expect(classHeaders({ priority: undefined, tenant: 't-1' })).toEqual({ 'x-tenant-id': 't-1' });
  });
});

describe('LoadSetupError', () => {
  it('is an Error named for the CLI to recognise', () => {
    const error = new LoadSetupError('no model');
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('LoadSetupError');
    expect(error.message).toBe('no model');
  });
});

describe('grpcTransport', () => {
  it('names its target and starts attempts with the request, the deadline and the recorder', () => {
    const recorder = new LoadRecorder();
    const transport = grpcTransport(options({ deadlineMs: 750 }), mulberry32(1), recorder);
    expect(transport.target).toBe('127.0.0.1:1');
    expect(transport.describe).toBeUndefined();
    transport.prepare(0)();
    expect(last().deadlineMs).toBe(750);
    expect(last().recorder).toBe(recorder);
    expect(last().client).toBeInstanceOf(grpc.Client);
    transport.close();
  });

  it('sends the priority and the tenant as metadata when given, and none otherwise', () => {
    const transport = grpcTransport(options({ priority: -2, tenant: 'acme' }), mulberry32(1), new LoadRecorder());
    transport.prepare(0)();
    expect(last().metadata).toEqual({ 'x-request-priority': '-2', 'x-tenant-id': 'acme' });
    transport.close();
    const plain = grpcTransport(options(), mulberry32(1), new LoadRecorder());
    plain.prepare(0)();
    expect(last().metadata).toEqual({});
    plain.close();
  });

  it('builds a tokenized request with the seed and index in its id, lengths in range and ids in the vocabulary', () => {
    const requests = requestsOf({ promptTokens: { min: 5, max: 40 }, maxTokens: { min: 2, max: 9 }, stream: false }, [0, 1, 2, 3, 4, 5, 6, 7]);
    for (const [index, request] of requests.entries()) {
      expect(request.request_id).toBe(`load-9-${index}`);
      expect(request.stream).toBe(false);
      expect(request.tokenized?.original_text).toBe('');
      const ids = request.tokenized!.input_ids!;
      expect(ids.length).toBeGreaterThanOrEqual(5);
      expect(ids.length).toBeLessThanOrEqual(40);
      expect(ids.every((id) => Number.isInteger(id) && id >= 1 && id < 32_000)).toBe(true);
      expect(request.sampling_params?.n).toBe(1);
      expect(request.sampling_params?.max_tokens).toBeGreaterThanOrEqual(2);
      expect(request.sampling_params?.max_tokens).toBeLessThanOrEqual(9);
    }
    // Not the same request eight times over.
    expect(new Set(requests.map((r) => r.tokenized!.input_ids!.join(','))).size).toBe(8);
  });

  it('draws the same requests for the same seed, and others for another', () => {
    const over = { promptTokens: { min: 1, max: 64 }, maxTokens: { min: 1, max: 64 } };
    const a = requestsOf(over, [0, 1, 2]);
    expect(requestsOf(over, [0, 1, 2])).toEqual(a);
    expect(requestsOf({ ...over, seed: 10 }, [0, 1, 2]).map((r) => r.tokenized!.input_ids)).not.toEqual(a.map((r) => r.tokenized!.input_ids));
  });

  it('draws at prepare time: the order attempts start in does not change the requests', () => {
    const over = { promptTokens: { min: 1, max: 64 } };
    expect(requestsOf(over, [0, 1, 2], [2, 0, 1])).toEqual(requestsOf(over, [0, 1, 2]));
  });

  it('sends the very same request again on a retry', () => {
    const transport = grpcTransport(options(), mulberry32(2), new LoadRecorder());
    const start = transport.prepare(4);
    start();
    const first = last().request;
    start();
    expect(started).toHaveLength(2);
    expect(last().request).toBe(first);
    transport.close();
  });

  it('uses one client for every attempt, and close() shuts its channel', () => {
    const transport = grpcTransport(options(), mulberry32(2), new LoadRecorder());
    transport.prepare(0)();
    transport.prepare(1)();
    const [a, b] = started as Started[];
    expect(a!.client).toBe(b!.client);
    transport.close();
    expect(a!.client.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.SHUTDOWN);
  });
});

describe('draw, lognormal (--length-distribution lognormal)', () => {
  const sample = (range: { min: number; max: number }, n = 20_000): number[] => {
    const random = mulberry32(7);
    return Array.from({ length: n }, () => draw(range, random, 'lognormal'));
  };

  it('stays within MIN-MAX, whole numbers, with its median at their geometric mean', () => {
    const values = sample({ min: 16, max: 1024 });
    expect(values.every((v) => Number.isInteger(v) && v >= 16 && v <= 1024)).toBe(true);
    const sorted = [...values].sort((a, b) => a - b);
    expect(sorted[sorted.length >> 1]).toBeGreaterThan(118); // sqrt(16 x 1024) = 128
    expect(sorted[sorted.length >> 1]).toBeLessThan(138);
  });

  it('is heavy-tailed: most lengths short, a few near MAX, unlike uniform draws', () => {
    const heavy = sample({ min: 16, max: 1024 });
    const share = (values: number[], pred: (v: number) => boolean): number => values.filter(pred).length / values.length;
    // sigma = ln(64) / 4: P(<= 256) = Phi(ln 2 / sigma) = 0.747, P(>= 768) = 1 - Phi(ln 6 / sigma) = 0.043.
    expect(share(heavy, (v) => v <= 256)).toBeCloseTo(0.747, 1);
    expect(share(heavy, (v) => v >= 768)).toBeCloseTo(0.043, 1);
    const random = mulberry32(7);
    const flat = Array.from({ length: 20_000 }, () => draw({ min: 16, max: 1024 }, random));
    expect(share(flat, (v) => v <= 256)).toBeLessThan(0.3);
  });

  it('gives the fixed value for a range of one, and the same draws for the same seed', () => {
    expect(sample({ min: 64, max: 64 }, 10)).toEqual(Array.from({ length: 10 }, () => 64));
    expect(sample({ min: 8, max: 512 }, 50)).toEqual(sample({ min: 8, max: 512 }, 50));
  });
});
