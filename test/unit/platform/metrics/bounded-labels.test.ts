import { describe, expect, it } from 'vitest';
import { BoundedLabels, OTHER_LABEL } from '../../../../src/platform/metrics/bounded-labels.js';

describe('BoundedLabels', () => {
  it('gives the first max values a series and counts the rest as other', () => {
    const labels = new BoundedLabels(2);
    expect(labels.label('a')).toBe('a');
    expect(labels.label('b')).toBe('b');
    expect(labels.label('c')).toBe(OTHER_LABEL);
    expect(labels.label('a')).toBe('a');
    expect(labels.values()).toEqual(['a', 'b']);
  });

  it('never gives a value literally named other a series of its own, and 0 keeps none', () => {
    expect(new BoundedLabels(5).label(OTHER_LABEL)).toBe(OTHER_LABEL);
    const none = new BoundedLabels(0);
    expect(none.label('a')).toBe(OTHER_LABEL);
    expect(none.values()).toEqual([]);
  });

  it('stays bounded under many distinct values', () => {
    const labels = new BoundedLabels(10);
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) seen.add(labels.label(`tenant-${i}`));
    expect(seen.size).toBe(11);
    expect(() => new BoundedLabels(-1)).toThrow(RangeError);
  });
});
