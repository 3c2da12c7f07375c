// Priority classes: the flag's list, the class of a priority (largest key <= it, else scale 1), and thresholds scaled by it.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_CLASS_LABEL,
  MAX_PRIORITY_CLASSES,
  NO_PRIORITY_SCALES,
  parsePriorityScaleList,
  priorityClassOf,
  priorityScalesJson,
  priorityScalesOf,
  scaleThresholds,
} from '../../../../src/frontend/routing/priority-classes.js';
import type { PriorityScales } from '../../../../src/frontend/routing/contracts.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';

function parsed(text: string): PriorityScales {
  const result = parsePriorityScaleList(text);
  if ('problem' in result) throw new Error(result.problem);
  return result;
}

describe('parsePriorityScaleList', () => {
  it('reads PRIORITY=SCALE pairs, spaces and negative priorities allowed, sorted by priority', () => {
    expect(parsed(' 5=0.5, 1 = 0.8,-3=2 ')).toEqual([
      { priority: -3, scale: 2 },
      { priority: 1, scale: 0.8 },
      { priority: 5, scale: 0.5 },
    ]);
    expect(parsed('')).toEqual([]);
    expect(Object.isFrozen(parsed('1=0.5'))).toBe(true);
  });

  it.each([
    ['1=0', 'scale must be a number > 0 and <= 10, got 0'],
    ['1=10.5', 'got 10.5'],
    ['1=-0.5', 'PRIORITY=SCALE'],
    ['1=abc', 'PRIORITY=SCALE'],
    ['x=0.5', 'PRIORITY=SCALE'],
    ['1.5=0.5', 'PRIORITY=SCALE'],
    ['1=0.5,1=0.7', 'priority 1 is given twice'],
    ['3000000000=0.5', 'priority must be between'],
    ['1', 'PRIORITY=SCALE'],
  ])('refuses %s with a problem naming what is wrong', (text, problem) => {
    const result = parsePriorityScaleList(text);
    expect(result).toEqual({ problem: expect.stringContaining(problem) });
  });

  it('accepts the bounds: a scale of exactly 10, and tiny ones above 0', () => {
    expect(parsed('0=10,1=1e-3')).toEqual([
      { priority: 0, scale: 10 },
      { priority: 1, scale: 0.001 },
    ]);
  });

  it(`refuses more than ${MAX_PRIORITY_CLASSES} classes (the class label's cardinality)`, () => {
    const pairs = Array.from({ length: MAX_PRIORITY_CLASSES + 1 }, (_, i) => [i, 0.5] as const);
    expect(priorityScalesOf(pairs)).toEqual({ problem: expect.stringContaining(`at most ${MAX_PRIORITY_CLASSES}`) });
  });
});

describe('priorityClassOf', () => {
  const scales = parsed('1=0.8,5=0.5');

  it('is the largest key <= the priority; below every key (or no key, or no priority) the scale-1 default', () => {
    expect(priorityClassOf(scales, 0)).toEqual({ label: DEFAULT_CLASS_LABEL, scale: 1 });
    expect(priorityClassOf(scales, -100)).toEqual({ label: 'default', scale: 1 });
    expect(priorityClassOf(scales, 1)).toEqual({ label: '1', scale: 0.8 });
    expect(priorityClassOf(scales, 4)).toEqual({ label: '1', scale: 0.8 });
    expect(priorityClassOf(scales, 5)).toEqual({ label: '5', scale: 0.5 });
    expect(priorityClassOf(scales, 2 ** 31 - 1)).toEqual({ label: '5', scale: 0.5 });
    expect(priorityClassOf(NO_PRIORITY_SCALES, 9)).toEqual({ label: 'default', scale: 1 });
    expect(priorityClassOf(scales, undefined)).toEqual({ label: 'default', scale: 1 });
  });

  it('labels negative keys as written', () => {
    expect(priorityClassOf(parsed('-10=1.5'), -3)).toEqual({ label: '-10', scale: 1.5 });
  });
});

describe('scaleThresholds', () => {
  it('multiplies every set threshold, leaves off checks off, and returns the same object at scale 1', () => {
    const thresholds = { active_decode_blocks_threshold: 0.8, active_prefill_tokens_threshold: 1000, active_prefill_tokens_threshold_frac: null };
    expect(scaleThresholds(thresholds, 0.5)).toEqual({
      active_decode_blocks_threshold: 0.4,
      active_prefill_tokens_threshold: 500,
      active_prefill_tokens_threshold_frac: null,
    });
    expect(scaleThresholds(thresholds, 1)).toBe(thresholds);
    expect(scaleThresholds(THRESHOLDS_OFF, 0.1)).toEqual(THRESHOLDS_OFF);
  });
});

describe('priorityScalesJson', () => {
  it('is the /busy_threshold form: priorities as string keys', () => {
    expect(priorityScalesJson(parsed('5=0.5,1=0.8'))).toEqual({ '1': 0.8, '5': 0.5 });
    expect(priorityScalesJson(NO_PRIORITY_SCALES)).toEqual({});
  });
});
