// ThresholdStore: flag defaults for every model, per-model changes with Dynamo's "null never clears", and DELETE's disable.
import { describe, expect, it } from 'vitest';
import type { Thresholds } from '../../../../src/frontend/routing/contracts.js';
import { ThresholdStore } from '../../../../src/frontend/routing/thresholds.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';

const DEFAULTS: Thresholds = { ...THRESHOLDS_OFF, active_decode_blocks_threshold: 0.9, active_prefill_tokens_threshold: 1000 };

describe('ThresholdStore', () => {
  it('gives every model the defaults until it is changed', () => {
    const store = new ThresholdStore(DEFAULTS);
    expect(store.get('a')).toEqual(DEFAULTS);
    expect(store.get('b')).toEqual(DEFAULTS);
  });

  it('sets the non-null fields given, for that model only, and leaves the rest and the defaults as they were', () => {
    const store = new ThresholdStore(DEFAULTS);
    const updated = store.update('a', { active_prefill_tokens_threshold_frac: 1.5, active_decode_blocks_threshold: null });
    const expected = { ...DEFAULTS, active_prefill_tokens_threshold_frac: 1.5 };
    expect(updated).toEqual(expected);
    expect(store.get('a')).toEqual(expected);
    expect(store.get('b')).toEqual(DEFAULTS);
    expect(DEFAULTS.active_prefill_tokens_threshold_frac).toBeNull();
  });

  it("builds on the model's earlier changes, and ignores fields that are not checks", () => {
    const store = new ThresholdStore(DEFAULTS);
    store.update('a', { active_prefill_tokens_threshold: 5 });
    store.update('a', { active_decode_blocks_threshold: 0.5, bogus: 3 } as Partial<Thresholds>);
    expect(store.get('a')).toEqual({ ...DEFAULTS, active_prefill_tokens_threshold: 5, active_decode_blocks_threshold: 0.5 });
    expect(Object.keys(store.get('a')).sort()).toEqual(Object.keys(THRESHOLDS_OFF).sort());
  });

  it('turns one check off with disable, which a later null cannot turn back on', () => {
    const store = new ThresholdStore(DEFAULTS);
    expect(store.disable('a', 'active_decode_blocks_threshold')).toEqual({ ...DEFAULTS, active_decode_blocks_threshold: null });
    store.update('a', { active_decode_blocks_threshold: null });
    expect(store.get('a').active_decode_blocks_threshold).toBeNull();
    expect(store.get('b')).toEqual(DEFAULTS);
  });

  it('hands out frozen values, so a reader cannot change what the next request sees', () => {
    const store = new ThresholdStore(DEFAULTS);
    const updated = store.update('a', { active_prefill_tokens_threshold: 7 });
    expect(Object.isFrozen(updated)).toBe(true);
    expect(Object.isFrozen(store.disable('a', 'active_prefill_tokens_threshold'))).toBe(true);
  });
});

describe('ThresholdStore priority classes', () => {
  const FLAG_SCALES = Object.freeze([Object.freeze({ priority: 5, scale: 0.5 })]);

  it('gives every model the flag classes (none by default) until one is set, and a set replaces the list whole', () => {
    expect(new ThresholdStore(DEFAULTS).priorityScales('a')).toEqual([]);
    const store = new ThresholdStore(DEFAULTS, FLAG_SCALES);
    expect(store.priorityScales('a')).toEqual(FLAG_SCALES);
    const set = store.setPriorityScales('a', [
      { priority: 9, scale: 0.2 },
      { priority: 1, scale: 0.9 },
    ]);
    expect(set).toEqual([
      { priority: 1, scale: 0.9 },
      { priority: 9, scale: 0.2 },
    ]);
    expect(Object.isFrozen(set)).toBe(true);
    expect(store.priorityScales('a')).toEqual(set);
    expect(store.priorityScales('b')).toEqual(FLAG_SCALES);
    expect(store.setPriorityScales('a', [])).toEqual([]);
    expect(store.priorityScales('a')).toEqual([]);
  });

  it('keeps a model thresholds and classes apart: changing one leaves the other', () => {
    const store = new ThresholdStore(DEFAULTS, FLAG_SCALES);
    store.update('a', { active_prefill_tokens_threshold: 5 });
    expect(store.priorityScales('a')).toEqual(FLAG_SCALES);
    store.setPriorityScales('a', []);
    expect(store.get('a').active_prefill_tokens_threshold).toBe(5);
  });
});
