/** The mistyped-variable matcher: close unknown DYN_ names get a suggestion, nothing else does. */
import { describe, expect, it } from 'vitest';
import { describeEnvTypo, editDistance, findEnvTypos } from '../../../../src/platform/config/env-typos.js';
import { SIDECAR_OPTIONS } from '../../../../src/sidecar/config/options.js';

const KNOWN = Object.values(SIDECAR_OPTIONS).map((spec) => spec.env);

describe('editDistance', () => {
  it.each([
    ['abc', 'abc', 0],
    ['abc', 'abd', 1],
    ['abc', 'ab', 1],
    ['abc', 'acb', 1],
    ['abcd', 'badc', 2],
    ['', 'abc', 3],
    ['kitten', 'sitting', 3],
  ])('%s -> %s is %i', (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });
});

describe('findEnvTypos', () => {
  it.each([
    ['DYN_ENGINE_REQUEST_LIMT', 'DYN_ENGINE_REQUEST_LIMIT'], // a dropped letter
    ['DYN_ENGINE_REQEUST_LIMIT', 'DYN_ENGINE_REQUEST_LIMIT'], // swapped letters
    ['DYN_DYNAMO_REQUEST_QUEUE_LIMITS', 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT'], // an extra letter
    ['DYN_SYSTEM_PROT', 'DYN_SYSTEM_PORT'],
    ['DYN_SIDECAR_IDLE_TIMEOUT', 'DYN_SIDECAR_IDLE_TIMEOUT_MS'],
    ['DYN_KV_BLOCK_SIZ', 'DYN_KV_BLOCK_SIZE'],
  ])('suggests the known name for %s', (name, suggestion) => {
    const typos = findEnvTypos({ [name]: '32' }, KNOWN);
    expect(typos).toEqual([{ name, suggestion, distance: expect.any(Number) }]);
    expect(describeEnvTypo(typos[0]!)).toBe(`${name} is not a known setting; did you mean ${suggestion}?`);
  });

  it('says nothing about known names, names far from any, other prefixes, or empty values', () => {
    const env = {
      DYN_ENGINE_REQUEST_LIMIT: '32',
      DYN_LOG: 'debug', // another Dynamo component's setting
      DYN_SOMETHING_ELSE_ENTIRELY: '1',
      ENGINE_REQUEST_LIMT: '3', // not DYN_
      dyn_engine_request_limt: '3',
      DYN_ENGINE_REQUEST_LIMTT: '',
      PATH: '/bin',
    };
    expect(findEnvTypos(env, KNOWN)).toEqual([]);
  });

  it('does not match short names by accident', () => {
    expect(findEnvTypos({ DYN_A: '1', DYN_XY: '1' }, ['DYN_AB', 'DYN_XYZ'])).toEqual([]);
  });

  it('reports several typos sorted by name', () => {
    expect(findEnvTypos({ DYN_SYSTEM_PROT: '1', DYN_COMPONNET: 'x' }, KNOWN).map((t) => t.name)).toEqual(['DYN_COMPONNET', 'DYN_SYSTEM_PROT']);
  });
});
