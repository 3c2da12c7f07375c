// OpenAI stop strings over streamed text: the cut, the held-back tail, and the end of output.
import { describe, expect, it } from 'vitest';
import { StopMatcher } from '../../../../src/frontend/text/stop-strings.js';

describe('StopMatcher', () => {
  it('cuts at the earliest occurrence whichever stop string is listed first', () => {
    expect(new StopMatcher(['zz', 'b']).push('abzz')).toEqual({ text: 'a', stopped: true });
    expect(new StopMatcher(['b', 'zz']).push('azzb')).toEqual({ text: 'a', stopped: true });
  });

  it('ends with empty text when the output starts with a stop string', () => {
    expect(new StopMatcher(['\n']).push('\nrest')).toEqual({ text: '', stopped: true });
  });

  it('finds a stop string that completes across the held tail and the next piece', () => {
    const stops = new StopMatcher(['abc']);
    expect(stops.push('xab')).toEqual({ text: 'x', stopped: false });
    expect(stops.push('cy')).toEqual({ text: '', stopped: true });
  });

  it('holds back the longest tail that is a prefix of any stop string', () => {
    const stops = new StopMatcher(['ab', 'abcd']);
    expect(stops.push('xabc')).toEqual({ text: 'x', stopped: true });
    const longer = new StopMatcher(['q', 'abcd']);
    expect(longer.push('xabc')).toEqual({ text: 'x', stopped: false });
    expect(longer.flush()).toBe('abc');
  });

  it('releases a held tail as soon as the next piece rules the stop string out', () => {
    const stops = new StopMatcher(['END']);
    expect(stops.push('E')).toEqual({ text: '', stopped: false });
    expect(stops.push('N')).toEqual({ text: '', stopped: false });
    expect(stops.push('x')).toEqual({ text: 'ENx', stopped: false });
    expect(stops.flush()).toBe('');
  });

  it('does not hold back a whole stop string length: only proper prefixes are kept', () => {
    const stops = new StopMatcher(['aa']);
    // "a" may start "aa"; nothing else is held.
    expect(stops.push('ba')).toEqual({ text: 'b', stopped: false });
    expect(stops.flush()).toBe('a');
  });

  it('passes an empty piece through without changing what is held', () => {
    const stops = new StopMatcher(['<e>']);
    expect(stops.push('a<')).toEqual({ text: 'a', stopped: false });
    expect(stops.push('')).toEqual({ text: '', stopped: false });
    expect(stops.flush()).toBe('<');
  });

  it('after a stop, returns nothing more, neither from push nor from flush', () => {
    const stops = new StopMatcher(['.']);
    expect(stops.push('one. two')).toEqual({ text: 'one', stopped: true });
    expect(stops.push('three')).toEqual({ text: '', stopped: true });
    expect(stops.flush()).toBe('');
  });

  it('empties the held tail on flush, so a second flush returns nothing', () => {
    const stops = new StopMatcher(['xy']);
    stops.push('ax');
    expect(stops.flush()).toBe('x');
    expect(stops.flush()).toBe('');
  });

  it('with no stop strings, holds nothing back and never stops', () => {
    const stops = new StopMatcher([]);
    expect(stops.push('anything at all')).toEqual({ text: 'anything at all', stopped: false });
    expect(stops.flush()).toBe('');
  });

  it('ignores empty stop strings among real ones (an empty one would match at 0)', () => {
    expect(new StopMatcher(['', 'z']).push('abz')).toEqual({ text: 'ab', stopped: true });
  });
});
