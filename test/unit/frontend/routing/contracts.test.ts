/**
 * BUSY_CHECKS, the one runtime value of the routing contracts: the three busy checks under
 * Dynamo's names, frozen, and exactly the fields of Thresholds, the flags' names and what the
 * frontend config gives. Everything else in contracts.ts is types (compiled away).
 */
import { describe, expect, it } from 'vitest';
import { parseFrontendConfig } from '../../../../src/frontend/frontend-config.js';
import { FRONTEND_OPTIONS } from '../../../../src/frontend/options.js';
import { BUSY_CHECKS, type BusyCheck, type Thresholds } from '../../../../src/frontend/routing/contracts.js';

/** camelCase option key of a check: active_prefill_tokens_threshold -> activePrefillTokensThreshold. */
const optionKey = (check: BusyCheck) => check.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()) as keyof typeof FRONTEND_OPTIONS;

describe('BUSY_CHECKS', () => {
  it("names the three checks as Dynamo's /busy_threshold API does, each once", () => {
    expect(BUSY_CHECKS).toEqual(['active_decode_blocks_threshold', 'active_prefill_tokens_threshold', 'active_prefill_tokens_threshold_frac']);
    expect(new Set(BUSY_CHECKS).size).toBe(3);
  });

  it('cannot be changed at run time (the admin API validates against it)', () => {
    expect(Object.isFrozen(BUSY_CHECKS)).toBe(true);
    expect(() => (BUSY_CHECKS as BusyCheck[]).push('active_decode_blocks_threshold')).toThrow(TypeError);
    expect(BUSY_CHECKS).toHaveLength(3);
  });

  it('is exactly the fields of Thresholds', () => {
    // The compiler refuses a missing or extra field here, so these keys are Thresholds' keys.
    const all: Thresholds = { active_decode_blocks_threshold: 0.9, active_prefill_tokens_threshold: 100, active_prefill_tokens_threshold_frac: 1.5 };
    expect([...BUSY_CHECKS].sort()).toEqual(Object.keys(all).sort());
  });

  it("matches the frontend's flags and env twins, and the thresholds its config gives", () => {
    for (const check of BUSY_CHECKS) {
      const spec = FRONTEND_OPTIONS[optionKey(check)] as { flag: string; env: string };
      expect(spec.flag.split(' ')[0]).toBe(`--${check.replaceAll('_', '-')}`);
      expect(spec.env).toBe(`DYN_${check.toUpperCase()}`);
    }
    const { thresholds } = parseFrontendConfig({ workers: ['127.0.0.1:50050'] }, {});
    expect(Object.keys(thresholds).sort()).toEqual([...BUSY_CHECKS].sort());
  });
});
