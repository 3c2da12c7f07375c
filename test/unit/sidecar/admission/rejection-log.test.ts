/**
 * RejectionLog under fake timers: one warn line when a burst of rejections starts, one info line
 * with its count and length once it has been quiet for quietMs, nothing per rejection in between,
 * a fresh burst after that, and no line after close().
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RejectionLog } from '../../../../src/sidecar/admission/rejection-log.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const WARN = 'rejecting calls: worker at capacity';
const OVER = 'rejection burst over';

afterEach(() => {
  vi.useRealTimers();
});

function setup(quietMs = 1000) {
  vi.useFakeTimers({ now: 0 });
  const logger = recordingLogger();
  const state = { engine_request: 4, request_queue: 2 };
  const log = new RejectionLog(
    logger,
    () => ({ ...state }),
    quietMs,
    () => Date.now(),
  );
  return { logger, state, log };
}

describe('RejectionLog', () => {
  it('logs one warning, with the admission state, at the first rejection of a burst and none for the rest', () => {
    const { logger, log } = setup();
    log.rejected();
    vi.advanceTimersByTime(100);
    for (let i = 0; i < 50; i++) log.rejected();
    expect(logger.lines).toEqual([{ level: 'warn', msg: WARN, fields: { engine_request: 4, request_queue: 2 } }]);
    expect(log.total).toBe(51);
  });

  it('ends the burst quietMs after the last rejection, with its count and length and the state at that time', () => {
    const { logger, state, log } = setup(1000);
    log.rejected(); // t = 0
    vi.advanceTimersByTime(500);
    log.rejected(); // t = 500
    vi.advanceTimersByTime(400);
    log.rejected(); // t = 900
    state.engine_request = 1;
    vi.advanceTimersByTime(999); // t = 1899: quiet for 999 ms only
    expect(logger.find(OVER)).toEqual([]);
    vi.advanceTimersByTime(1); // t = 1900
    expect(logger.find(OVER)).toEqual([{ level: 'info', msg: OVER, fields: { rejected: 3, duration_ms: 900, engine_request: 1, request_queue: 2 } }]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('ends a burst of one rejection after quietMs, with a length of 0', () => {
    const { logger, log } = setup(250);
    log.rejected();
    vi.advanceTimersByTime(249);
    expect(logger.find(OVER)).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(logger.find(OVER)[0]?.fields).toMatchObject({ rejected: 1, duration_ms: 0 });
  });

  it('starts a new burst after one is over: a new warning, and a count of its own', () => {
    const { logger, log } = setup(1000);
    log.rejected();
    log.rejected();
    vi.advanceTimersByTime(1000);
    log.rejected();
    vi.advanceTimersByTime(1000);
    expect(logger.find(WARN)).toHaveLength(2);
    expect(logger.find(OVER).map((line) => line.fields['rejected'])).toEqual([2, 1]);
    expect(log.total).toBe(3);
  });

  it('keeps one timer per burst however many rejections come', () => {
    const { log } = setup(1000);
    for (let i = 0; i < 100; i++) {
      log.rejected();
      vi.advanceTimersByTime(10);
    }
    expect(vi.getTimerCount()).toBe(1);
  });

  it('logs nothing more after close(), even with a burst open', () => {
    const { logger, log } = setup(1000);
    log.rejected();
    log.close();
    vi.advanceTimersByTime(10_000);
    expect(logger.find(OVER)).toHaveLength(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('is idle and closable before any rejection', () => {
    const { logger, log } = setup();
    log.close();
    expect(log.total).toBe(0);
    expect(logger.lines).toHaveLength(0);
  });

  it('does not keep the process alive while waiting for a burst to end', () => {
    vi.useRealTimers();
    const unref = vi.fn();
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation((() => ({ unref })) as unknown as typeof setTimeout);
    try {
      new RejectionLog(recordingLogger(), () => ({})).rejected();
      expect(unref).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });
});
