import { describe, expect, it } from 'vitest';
import { admitNow } from '../../../../src/sidecar/load/admit-now.js';

describe('admit_now', () => {
  it.each([
    { name: 'admission off', counts: { engineRequest: 3, requestQueue: 0 }, refused: false, expected: null },
    { name: 'free slots and queue places', counts: { engineRequest: 1, requestQueue: 0, limit: 4, queueLimit: 2 }, refused: false, expected: 5 },
    { name: 'full slots, queue places left', counts: { engineRequest: 4, requestQueue: 1, limit: 4, queueLimit: 2 }, refused: false, expected: 1 },
    { name: 'full gate', counts: { engineRequest: 4, requestQueue: 2, limit: 4, queueLimit: 2 }, refused: false, expected: 0 },
    { name: 'no queue', counts: { engineRequest: 2, requestQueue: 0, limit: 4, queueLimit: 0 }, refused: false, expected: 2 },
    {
      name: 'queue places refused after an expected-wait refusal',
      counts: { engineRequest: 4, requestQueue: 0, limit: 4, queueLimit: 2 },
      refused: true,
      expected: 0,
    },
    {
      name: 'the budget holds a call back: no slot, queue places only',
      counts: { engineRequest: 1, requestQueue: 0, limit: 4, queueLimit: 2, hasRoom: false },
      refused: false,
      expected: 2,
    },
    {
      name: 'only the places whose call would expect a wait within the max',
      counts: { engineRequest: 3, requestQueue: 1, limit: 4, queueLimit: 4, queuePlaces: 1 },
      refused: false,
      expected: 2,
    },
    {
      name: 'no place within the max wait: slots only',
      counts: { engineRequest: 3, requestQueue: 0, limit: 4, queueLimit: 2, queuePlaces: 0 },
      refused: false,
      expected: 1,
    },
    { name: 'the limit lowered under the calls running', counts: { engineRequest: 6, requestQueue: 3, limit: 4, queueLimit: 2 }, refused: false, expected: 0 },
  ])('$name -> $expected', ({ counts, refused, expected }) => {
    expect(admitNow(counts, refused)).toBe(expected);
  });
});
