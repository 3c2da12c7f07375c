/** AdmissionControl: one change, from the admin API or SIGHUP, reaches the gate, the pushback and the load events, logged and counted. */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { AdmissionControl, gateLimits, settingsJson, type ChangeSource } from '../../../../src/sidecar/admission/admission-control.js';
import { AdmissionGate, type Permit } from '../../../../src/sidecar/admission/gate.js';
import { admissionSettingsOf, parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { RetryPushback } from '../../../../src/sidecar/admission/retry-pushback.js';
import { admitting } from '../../../support/admitting.js';

function setup(flags: Record<string, string> = { engineRequestLimit: '2' }) {
  const config = parseSidecarConfig(flags, {});
  const settings = admissionSettingsOf(config);
  const { limit, queueLimit, firstTokenLimit } = gateLimits(settings);
  const gate = new AdmissionGate(limit, queueLimit, firstTokenLimit);
  const counted: ChangeSource[] = [];
  const events: string[] = [];
  const logger = recordingLogger();
  const control = new AdmissionControl({
    gate,
    settings,
    metrics: { admissionChanged: (source) => counted.push(source) },
    onChange: () => events.push(`published limit=${gate.limit}`),
    logger,
    pushback: new RetryPushback(settings, gate, () => 0, mulberry32(3)),
    limitFromEngine: config.engineRequestLimitAuto,
  });
  return { gate, control, counted, events, logger };
}

describe('AdmissionControl.engineReported (--engine-request-limit auto)', () => {
  it("starts at the fallback, then takes the engine's limit as a change from source engine, published and logged", () => {
    const { gate, control, counted, events, logger } = setup({ engineRequestLimit: 'auto' });
    expect(gate.limit).toBe(10_000);
    expect(control.engineReported(384)).toBe(true);
    expect([gate.limit, control.limitInForce]).toEqual([384, 384]);
    expect(counted).toEqual(['engine']);
    expect(events).toEqual(['published limit=384']);
    expect(logger.find('admission changed')[0]!.fields).toMatchObject({ source: 'engine', engine_request_limit: '10000 -> 384' });
  });

  it.each<[string, ChangeSource]>([
    ['the admin API', 'api'],
    ['SIGHUP', 'sighup'],
  ])("leaves N alone once %s has set it: the last word is the operator's", (_who, source) => {
    const { gate, control } = setup({ engineRequestLimit: 'auto' });
    control.change({ engineRequestLimit: 20 }, source);
    expect(control.engineReported(384)).toBe(false);
    expect(gate.limit).toBe(20);
  });

  it('keeps listening to the engine after other settings changed, and never applies with a fixed N', () => {
    const auto = setup({ engineRequestLimit: 'auto' });
    auto.control.change({ requestQueueLimit: 4 }, 'api');
    expect(auto.control.engineReported(12)).toBe(true);
    expect(auto.gate.limit).toBe(12);
    const fixed = setup({ engineRequestLimit: '2' });
    expect(fixed.control.engineReported(12)).toBe(false);
    expect(fixed.gate.limit).toBe(2);
  });

  it("in adaptive mode the engine's limit is the ceiling the controller moves under", () => {
    const { gate, control } = setup({ engineRequestLimit: 'auto', admissionMode: 'adaptive', adaptiveMinLimit: '2' });
    control.engineReported(12);
    expect(control.settings.engineRequestLimit).toBe(12);
    expect(gate.limit).toBeLessThanOrEqual(12);
  });
});

describe('AdmissionControl', () => {
  it('starts from the parsed settings; admission off is an unbounded gate without a queue', () => {
    const { control, gate } = setup();
    expect(settingsJson(control.settings)).toEqual({
      engine_request_limit: 2,
      request_queue_limit: 16,
      request_queue_timeout_ms: 0,
      admission_mode: 'static',
      adaptive_min_limit: 1,
      first_token_limit: null,
      max_queue_wait_ms: 0,
      retry_pushback_mode: 'fixed',
      retry_pushback_ms: 250,
      retry_pushback_min_ms: 100,
      retry_pushback_max_ms: 10_000,
    });
    expect([gate.limit, gate.queueLimit]).toEqual([2, 16]);
    expect(gateLimits({ engineRequestLimit: undefined, requestQueueLimit: 16, firstTokenLimit: 3 })).toEqual({
      limit: Infinity,
      queueLimit: 0,
      firstTokenLimit: Infinity,
    });
    expect(gateLimits({ engineRequestLimit: 8, requestQueueLimit: 4, firstTokenLimit: undefined })).toEqual({
      limit: 8,
      queueLimit: 4,
      firstTokenLimit: Infinity,
    });
    expect(gateLimits({ engineRequestLimit: 8, requestQueueLimit: 4, firstTokenLimit: 3 })).toEqual({ limit: 8, queueLimit: 4, firstTokenLimit: 3 });
    expect(settingsJson(setup({}).control.settings).engine_request_limit).toBeNull();
  });

  it('applies a partial change to the gate at once, then publishes, logs old -> new with the source, and counts it', () => {
    const { control, gate, counted, events, logger } = setup();
    const admitted: number[] = [];
    for (let i = 0; i < 6; i++) gate.acquire(admitting(() => admitted.push(i)));
    expect([gate.inEngine, gate.queued]).toEqual([2, 4]);
    expect(control.change({ engineRequestLimit: 4, requestQueueLimit: 8 }, 'api')).toEqual({ changed: ['engineRequestLimit', 'requestQueueLimit'] });
    expect([gate.inEngine, gate.queued, gate.limit, gate.queueLimit]).toEqual([4, 2, 4, 8]);
    expect(admitted).toEqual([2, 3]); // the two oldest waiters, at once
    expect(events).toEqual(['published limit=4']); // after the gate had the new N
    expect(counted).toEqual(['api']);
    expect(logger.find('admission changed', 'info')).toEqual([
      {
        level: 'info',
        msg: 'admission changed',
        fields: { source: 'api', engine_request_limit: '2 -> 4', request_queue_limit: '16 -> 8', engine_request: 2, request_queue: 4 },
      },
    ]);
    expect(control.lastChange.source).toBe('api');
    // Other settings kept their values.
    expect(control.settings.retryPushbackMs).toBe(250);
  });

  it('turns admission off (null) and on again, logged as null', () => {
    const { control, gate, logger } = setup();
    const held: Permit[] = [];
    for (let i = 0; i < 5; i++) gate.acquire(admitting((p) => held.push(p)));
    control.change({ engineRequestLimit: undefined }, 'sighup');
    expect([gate.inEngine, gate.queued, gate.limit]).toEqual([5, 0, Infinity]);
    control.change({ engineRequestLimit: 3 }, 'api');
    expect([gate.limit, gate.queueLimit]).toEqual([3, 16]); // the queue limit in force comes back with N
    expect(logger.find('admission changed').map((l) => [l.fields['source'], l.fields['engine_request_limit']])).toEqual([
      ['sighup', '2 -> null'],
      ['api', 'null -> 3'],
    ]);
  });

  it('counts and logs nothing for a change that changes nothing', () => {
    const { control, counted, events, logger } = setup();
    expect(control.change({ engineRequestLimit: 2, retryPushbackMs: 250 }, 'api')).toEqual({ changed: [] });
    expect(control.change({}, 'sighup')).toEqual({ changed: [] });
    expect([counted, events, logger.lines]).toEqual([[], [], []]);
    expect(control.lastChange.source).toBe('startup');
  });

  it('refuses a change whose pushback minimum would exceed its maximum, whole: nothing else applies', () => {
    const { control, gate, counted } = setup();
    const outcome = control.change({ engineRequestLimit: 9, retryPushbackMinMs: 5000, retryPushbackMaxMs: 1000 }, 'api');
    expect(outcome).toEqual({ problem: 'the retry pushback minimum (5000 ms) is above its maximum (1000 ms)' });
    expect(gate.limit).toBe(2);
    expect(counted).toEqual([]);
  });

  it('decides the pushback of each refusal: the fixed value, or a jittered estimate in adaptive mode', () => {
    const { control, gate } = setup();
    expect(control.retryPushbackMs()).toBe(250);
    control.change({ retryPushbackMs: 40 }, 'api');
    expect(control.retryPushbackMs()).toBe(40);
    for (let i = 0; i < 18; i++) gate.acquire(admitting(() => {}));
    control.pushback.slotHeld(1600);
    control.change({ retryPushbackMode: 'adaptive' }, 'api');
    // 16 queued + 1, N = 2, 1600 ms per call: 13,600 ms, above the default maximum of 10,000.
    expect(control.pushback.estimateMs()).toBe(10_000);
    const values = Array.from({ length: 200 }, () => control.retryPushbackMs());
    expect(Math.min(...values)).toBeGreaterThanOrEqual(7500);
    expect(Math.max(...values)).toBeLessThanOrEqual(10_000);
    expect(new Set(values).size).toBeGreaterThan(20);
  });

  it('gives the queue timeout in force to calls that queue after a change', () => {
    const { control } = setup();
    expect(control.queueTimeoutMs).toBe(0);
    control.change({ queueTimeoutMs: 1500 }, 'sighup');
    expect(control.queueTimeoutMs).toBe(1500);
  });
});

describe('AdmissionControl.queueRefusalMs (--max-queue-wait-ms)', () => {
  /** A control with N = 1 held by one call, and D = 1000 ms observed: a newcomer would wait 1000 ms. */
  function busy(maxQueueWaitMs: string) {
    const t = setup({ engineRequestLimit: '1', maxQueueWaitMs });
    t.gate.acquire(admitting(() => {}));
    t.control.pushback.slotHeld(1000);
    return t;
  }

  it('lets every call queue when off (0), however long the wait', () => {
    expect(busy('0').control.queueRefusalMs(10)).toBeUndefined();
  });

  it('refuses with the expected wait when it exceeds the setting', () => {
    expect(busy('999').control.queueRefusalMs(undefined)).toBe(1000);
    expect(busy('1000').control.queueRefusalMs(undefined)).toBeUndefined();
  });

  it("refuses when the wait exceeds what the call's own deadline leaves, though within the setting", () => {
    const { control } = busy('5000');
    expect(control.queueRefusalMs(999)).toBe(1000);
    expect(control.queueRefusalMs(1000)).toBeUndefined();
  });

  it('refuses with the pushback stand-in while there is no estimate yet, and takes a live change', () => {
    const t = setup({ engineRequestLimit: '1', maxQueueWaitMs: '10', retryPushbackMs: '300' });
    t.gate.acquire(admitting(() => {}));
    expect(t.control.queueRefusalMs(undefined), 'no call has ended yet: how long a slot takes is unknown').toBe(300);
    t.control.pushback.slotHeld(1000);
    expect(t.control.queueRefusalMs(undefined)).toBe(1000);
    expect(t.control.change({ maxQueueWaitMs: 0 }, 'api')).toEqual({ changed: ['maxQueueWaitMs'] });
    expect(t.control.queueRefusalMs(undefined)).toBeUndefined();
  });

  it('passes the first-token limit to the gate, and a live change of it', () => {
    const { gate, control } = setup({ engineRequestLimit: '8', firstTokenLimit: '2' });
    expect(gate.firstTokenLimit).toBe(2);
    control.change({ firstTokenLimit: undefined }, 'api');
    expect(gate.firstTokenLimit).toBe(Infinity);
  });
});

describe('AdmissionControl, adaptive mode (--admission-mode adaptive)', () => {
  const feed = (control: AdmissionControl, windows: number, ms: number): void => {
    for (let i = 0; i < windows * 10; i++) control.firstTokenAfter(ms);
  };

  it('moves the gate between --adaptive-min-limit and the configured limit by the time to first token', () => {
    const { gate, control } = setup({ engineRequestLimit: '16', admissionMode: 'adaptive', adaptiveMinLimit: '4' });
    expect([gate.limit, control.limitInForce]).toEqual([16, 16]);
    feed(control, 5, 50);
    expect(gate.limit).toBe(16);
    feed(control, 15, 500);
    expect(gate.limit).toBeLessThan(16);
    expect(gate.limit).toBeGreaterThanOrEqual(4);
    expect(control.limitInForce).toBe(gate.limit);
    expect(settingsJson(control.settings).engine_request_limit, 'the setting stays the ceiling').toBe(16);
  });

  it('goes back to the configured limit on a change to static, and keeps its estimate within a lowered ceiling', () => {
    const { gate, control } = setup({ engineRequestLimit: '16', admissionMode: 'adaptive' });
    feed(control, 5, 50);
    feed(control, 15, 500);
    const adapted = gate.limit;
    control.change({ engineRequestLimit: 8 }, 'api');
    expect(gate.limit).toBe(Math.min(adapted, 8));
    control.change({ admissionMode: 'static' }, 'api');
    expect(gate.limit).toBe(8);
    feed(control, 20, 5000);
    expect(gate.limit, 'static mode never moves N').toBe(8);
  });

  it('does nothing with admission off', () => {
    const { gate, control } = setup({ admissionMode: 'adaptive' });
    feed(control, 20, 5000);
    expect([gate.limit, control.limitInForce]).toEqual([Infinity, undefined]);
  });
});

describe('AdmissionControl.queuePlacesWithinWait (the queue places admit_now counts)', () => {
  function control(maxQueueWaitMs: string) {
    const config = parseSidecarConfig({ engineRequestLimit: '4', maxQueueWaitMs }, {});
    const settings = admissionSettingsOf(config);
    const { limit, queueLimit, firstTokenLimit } = gateLimits(settings);
    const gate = new AdmissionGate(limit, queueLimit, firstTokenLimit);
    const pushback = new RetryPushback(settings, gate, () => 0, mulberry32(3));
    const logger = recordingLogger();
    const admission = new AdmissionControl({
      gate,
      settings,
      metrics: { admissionChanged: () => {} },
      onChange: () => {},
      logger,
      pushback,
      limitFromEngine: false,
    });
    return { gate, pushback, admission };
  }

  it('every free place with the max wait off', () => {
    const { gate, admission } = control('0');
    expect(gate.queueLimit).toBeGreaterThan(2);
    expect(admission.queuePlacesWithinWait()).toBe(gate.queueLimit);
  });

  it('none before a slot time is known; then the places whose call would wait within the max, one behind another', () => {
    const { gate, pushback, admission } = control('600');
    for (let i = 0; i < 2; i++) gate.acquire(admitting(() => {}));
    expect(admission.queuePlacesWithinWait()).toBe(0);
    pushback.slotHeld(1000);
    // Engine taken to N = 4 by the calls sent first: the k-th queued waits (k + 1) x 1000 / 4 ms.
    expect(admission.queuePlacesWithinWait()).toBe(2);
  });
});
