import { describe, expect, it } from 'vitest';
import { formatGrpcTimeout, parseGrpcTimeout } from '../../../../src/protocol/grpc/deadline.js';

describe('grpc-timeout', () => {
  it('parses every unit of the spec into milliseconds', () => {
    expect(parseGrpcTimeout('2H')).toBe(7_200_000);
    expect(parseGrpcTimeout('3M')).toBe(180_000);
    expect(parseGrpcTimeout('5S')).toBe(5000);
    expect(parseGrpcTimeout('250m')).toBe(250);
    expect(parseGrpcTimeout('1500u')).toBeCloseTo(1.5);
    expect(parseGrpcTimeout('2000000n')).toBeCloseTo(2);
  });

  it('refuses values outside the spec: more than 8 digits, no unit, signs, spaces', () => {
    for (const bad of ['123456789m', '100', '-5S', '5 S', 'S', '1.5S', '10x', '']) expect(parseGrpcTimeout(bad)).toBeUndefined();
  });

  it('formats with at most 8 digits, rounding up so the engine never sees less time than is left', () => {
    expect(formatGrpcTimeout(1.0004)).toBe('1001u');
    expect(formatGrpcTimeout(99_999)).toBe('99999000u');
    expect(formatGrpcTimeout(100_000)).toBe('100000m');
    expect(formatGrpcTimeout(200_000_000)).toBe('200000S');
    expect(formatGrpcTimeout(-5)).toBe('0u');
    for (const ms of [0.3, 7, 12_345.678, 3_600_000, 9e12]) {
      const text = formatGrpcTimeout(ms);
      expect(text).toMatch(/^\d{1,8}[HMSmun]$/);
      expect(parseGrpcTimeout(text)!).toBeGreaterThanOrEqual(Math.min(ms, 99_999_999 * 3_600_000) - 1e-9);
    }
  });
});
