import { describe, expect, it } from 'vitest';
import { CONSERVATIVE_OUTPUT_TOKENS, MIN_OUTPUT_SAMPLES, OUTPUT_WINDOW, OutputLengths } from '../../../../src/sidecar/admission/output-lengths.js';

describe('OutputLengths', () => {
  it('reserves max_tokens, capped by the conservative guess, until enough calls completed', () => {
    const outputs = new OutputLengths();
    expect(outputs.expected(64)).toBe(64);
    expect(outputs.expected(100_000)).toBe(CONSERVATIVE_OUTPUT_TOKENS);
    expect(outputs.expected(undefined)).toBe(CONSERVATIVE_OUTPUT_TOKENS);
    for (let i = 0; i < MIN_OUTPUT_SAMPLES - 1; i++) outputs.completed(10);
    expect(outputs.quantile).toBeUndefined();
    expect(outputs.expected(512)).toBe(512);
  });

  it('then reserves min(max_tokens, the 90th percentile of recent outputs)', () => {
    const outputs = new OutputLengths();
    for (let i = 1; i <= 100; i++) outputs.completed(i);
    expect(outputs.quantile).toBe(91);
    expect(outputs.expected(1000)).toBe(91);
    expect(outputs.expected(20)).toBe(20);
    expect(outputs.expected(undefined)).toBe(91);
  });

  it('forgets outputs older than its window', () => {
    const outputs = new OutputLengths();
    for (let i = 0; i < OUTPUT_WINDOW; i++) outputs.completed(1000);
    for (let i = 0; i < OUTPUT_WINDOW; i++) outputs.completed(10);
    expect(outputs.quantile).toBe(10);
  });

  it('ignores nonsense', () => {
    const outputs = new OutputLengths();
    outputs.completed(-1);
    outputs.completed(NaN);
    expect(outputs.samples).toBe(0);
  });
});
