/**
 * Chaos on the engine connections: a sidecar with --upstream-connections 4, an engine request
 * limit N and a queue Q, in front of the simulated engine (its own process), under sustained
 * streaming load (N + Q calls at all times, so the gate is always full and never refuses), while
 * the test kills connections (both sockets at once) and sends GOAWAY on others, one step at a time,
 * through a relay between sidecar and engine that sees which call went on which connection.
 *
 * Admission sits above the pool: the engine never holds more than N calls at once (seen by the
 * relay on every stream, and in the sidecar's gauge), no slot leaks. A call in flight on a killed
 * connection fails with UNAVAILABLE, "connection lost"; one in flight on a connection that got
 * GOAWAY finishes; every other call succeeds, because another connection was always up. The
 * engine stays reachable (ready) throughout.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_LOST_MESSAGE } from '../../../../src/sidecar/proxy/engine-outcome.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startH2Relay, type H2Relay, type RelayConnection } from '../../../support/h2-relay.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { parseMetric, SystemUnderTest } from '../../../support/system-processes.js';
import { engineClient, startGenerate, tokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

const K = 4;
const N = 8;
const Q = 12;
/** Clients: exactly what the gate holds (N in the engine, Q queued), so no call is ever refused. */
const LANES = N + Q;
/** Tokens per call: about 0.5 s at the engine's 20 ms decode step. */
const MAX_TOKENS = 25;
/** A whole call: one chunk per token, then the complete message. */
const MESSAGES = MAX_TOKENS + 1;
const TAG = 'x-chaos-call';
/** Kill one connection, GOAWAY one, kill two at once: each step waits for the pool to be whole again. */
const STEPS = ['kill', 'goaway', 'kill', 'goaway', 'kill-two', 'goaway', 'kill', 'goaway', 'kill-two', 'kill', 'goaway', 'kill'] as const;
const KILLS = STEPS.reduce((n, step) => n + (step === 'kill' ? 1 : step === 'kill-two' ? 2 : 0), 0);
const GOAWAYS = STEPS.filter((step) => step === 'goaway').length;
const MAX_CALLS = 5000;
const LOAD_LIMIT_MS = 90_000;

interface CallRecord {
  readonly tag: string;
  readonly startedAt: number;
  endedAt: number;
  code: grpc.status | undefined;
  details: string;
  messages: number;
}

interface Action {
  readonly kind: 'kill' | 'goaway';
  readonly at: number;
  readonly connection: number;
  /** Tagged calls in flight on the connection at that moment. */
  readonly inFlight: string[];
}

const sys = new SystemUnderTest();
const cleanups: (() => unknown)[] = [];
let relay: H2Relay;
let sidecar: SidecarProcess;

beforeAll(async () => {
  const engine = await sys.engine();
  cleanups.push(() => sys.stopAll());
  relay = await startH2Relay(Number(engine.address.split(':')[1]), { tagHeader: TAG });
  cleanups.push(() => relay.close());
  sidecar = await startSidecarProcess(
    [
      '--upstream',
      relay.address,
      '--upstream-connections',
      String(K),
      '--engine-request-limit',
      String(N),
      // Nothing else on the engine connections: no GetLoads, no GetModelInfo.
      '--engine-load-source',
      'traffic',
      '--served-model-name',
      'chaos',
    ],
    { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: String(Q) },
  );
  cleanups.push(() => sidecar.stop('SIGKILL'));
});

afterAll(() => runCleanups(cleanups));

/** Connections the sidecar uses now: up, SETTINGS read, neither killed nor sent GOAWAY. */
const usable = (): RelayConnection[] => relay.connections.filter((c) => c.open && c.clientSettingsAcked && !c.killed && !c.goneAway);
const inFlight = (c: RelayConnection): string[] => [...c.streams.values()].filter((s) => !s.ended && s.tag !== undefined).map((s) => s.tag!);

describe(`a sidecar with --upstream-connections ${K}, limit ${N} and queue ${Q}, under load while connections are killed and sent GOAWAY`, () => {
  it('keeps the exact cap, leaks no slot, fails only the calls in flight on a killed connection, with UNAVAILABLE, and finishes those on a GOAWAY connection', async () => {
    await waitFor(async () => usable().length === K && (await sidecar.get('/ready')).status === 200, `${K} engine connections up`);
    const client = engineClient(sidecar.address);
    cleanups.push(() => client.close());

    // The load: LANES clients, each starting its next call as soon as the last one ends.
    const calls: CallRecord[] = [];
    let stopping = false;
    const loadDeadline = performance.now() + LOAD_LIMIT_MS;
    const runCall = (): Promise<void> => {
      const record: CallRecord = { tag: `c${calls.length}`, startedAt: performance.now(), endedAt: NaN, code: undefined, details: '', messages: 0 };
      calls.push(record);
      const metadata = new grpc.Metadata();
      metadata.set(TAG, record.tag);
      const request = { request_id: record.tag, tokenized: { input_ids: tokens(16) }, sampling_params: { max_tokens: MAX_TOKENS }, stream: true };
      // A deadline far beyond a call's half second: a call that hangs ends DEADLINE_EXCEEDED, which fails the test.
      const call = startGenerate(client, request, { deadline: Date.now() + 30_000 }, metadata);
      return new Promise((resolve) => {
        call.on('data', () => record.messages++);
        call.on('error', () => {});
        call.on('status', (status: grpc.StatusObject) => {
          record.endedAt = performance.now();
          record.code = status.code;
          record.details = status.details;
          resolve();
        });
      });
    };
    const lane = async (): Promise<void> => {
      while (!stopping && calls.length < MAX_CALLS && performance.now() < loadDeadline) await runCall();
    };
    const lanes = Array.from({ length: LANES }, lane);

    // The sidecar's own view, sampled all along: the engine gauge, and the engine reachable.
    let maxEngineRequest = 0;
    let upstreamDownSeen = false;
    let sampling = true;
    const sampler = (async () => {
      while (sampling && performance.now() < loadDeadline) {
        const metrics = await sidecar.metrics();
        maxEngineRequest = Math.max(maxEngineRequest, parseMetric(metrics, 'dynamo_engine_request'));
        if (parseMetric(metrics, 'dynamo_sidecar_upstream_up') !== 1) upstreamDownSeen = true;
        // A sampling period, not a wait for a condition.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    const actions: Action[] = [];
    const act = (kind: Action['kind'], connection: RelayConnection): void => {
      const record: Action = { kind, at: performance.now(), connection: connection.index, inFlight: inFlight(connection) };
      actions.push(record);
      if (kind === 'kill') connection.kill();
      else connection.goaway();
    };
    try {
      for (const step of STEPS) {
        // Sustained load between steps (2N more calls ended), then the pool whole again with calls
        // on every connection (new ones included), so that each step hits calls in flight.
        const ended = (): number => calls.filter((c) => c.code !== undefined).length;
        const target = ended() + 2 * N;
        await waitFor(() => ended() >= target, `${2 * N} more calls ended`, 20_000);
        await waitFor(() => usable().length === K && usable().every((c) => inFlight(c).length > 0), `${K} connections, each with calls in flight`, 20_000);
        const byLoad = usable().sort((a, b) => inFlight(b).length - inFlight(a).length);
        if (step === 'goaway') act('goaway', byLoad[0]!);
        else for (const victim of byLoad.slice(0, step === 'kill-two' ? 2 : 1)) act('kill', victim);
      }
      await waitFor(() => usable().length === K, `${K} connections again after the last step`, 20_000);
    } finally {
      stopping = true;
      await Promise.all(lanes);
      sampling = false;
      await sampler;
    }

    // Admission held across the pool: never more than N calls in the engine, and nothing left over.
    expect(relay.maxTaggedInFlight).toBe(N);
    expect(maxEngineRequest).toBeLessThanOrEqual(N);
    await waitFor(
      async () => (await sidecar.metric('dynamo_engine_request')) === 0 && (await sidecar.metric('dynamo_request_queue')) === 0,
      'the gauges back at 0',
    );
    expect(relay.taggedInFlight).toBe(0);
    expect(upstreamDownSeen).toBe(false);
    expect(sidecar.stderr()).not.toContain('"msg":"upstream unreachable"');

    // Every call ended, with OK or UNAVAILABLE only.
    expect(calls.length).toBeLessThan(MAX_CALLS);
    expect(calls.every((c) => c.code !== undefined)).toBe(true);
    const byTag = new Map(calls.map((c) => [c.tag, c]));
    const failed = calls.filter((c) => c.code !== grpc.status.OK);
    expect(failed.filter((c) => c.code !== grpc.status.UNAVAILABLE)).toEqual([]);

    // In flight on a killed connection: UNAVAILABLE, "connection lost"; each kill hit some.
    const kills = actions.filter((a) => a.kind === 'kill');
    expect(kills).toHaveLength(KILLS);
    for (const kill of kills) {
      expect(kill.inFlight.length).toBeGreaterThan(0);
      for (const tag of kill.inFlight) expect(byTag.get(tag)).toMatchObject({ code: grpc.status.UNAVAILABLE, details: ENGINE_LOST_MESSAGE });
    }
    // In flight on a connection sent GOAWAY: finished, OK; each GOAWAY hit some.
    const goaways = actions.filter((a) => a.kind === 'goaway');
    expect(goaways).toHaveLength(GOAWAYS);
    for (const goaway of goaways) {
      expect(goaway.inFlight.length).toBeGreaterThan(0);
      for (const tag of goaway.inFlight) expect(byTag.get(tag)).toMatchObject({ code: grpc.status.OK, messages: MESSAGES });
    }
    // Any other failure is a call on a killed connection too: its relay saw it there, or (sent just
    // as the connection died) never saw it at all, and it was running when a kill happened.
    const killed = new Set(kills.map((k) => k.connection));
    const placedOn = new Map<string, number>();
    for (const connection of relay.connections) for (const stream of connection.streams.values()) if (stream.tag) placedOn.set(stream.tag, connection.index);
    for (const call of failed) {
      expect(call.details).toBe(ENGINE_LOST_MESSAGE);
      const placed = placedOn.get(call.tag);
      if (placed !== undefined) expect(killed.has(placed)).toBe(true);
      else expect(kills.some((k) => call.startedAt < k.at && k.at < call.endedAt)).toBe(true);
    }
    // Every call on a connection never killed succeeded, and most calls did.
    for (const [tag, index] of placedOn) if (!killed.has(index)) expect(byTag.get(tag)?.code).toBe(grpc.status.OK);
    expect(calls.filter((c) => c.code === grpc.status.OK && c.messages !== MESSAGES)).toEqual([]);
    expect(calls.length - failed.length).toBeGreaterThan(failed.length * 3);
    expect((await sidecar.get('/ready')).status).toBe(200);
  }, 180_000);
});
