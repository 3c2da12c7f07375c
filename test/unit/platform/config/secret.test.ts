/** A Secret shows as *** however a config holding it is printed, and gives its value only to reveal(). */
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../../../src/platform/config/secret.js';

describe('Secret', () => {
  const secret = new Secret('hunter2-token');

  it('gives the value to reveal() only', () => {
    expect(secret.reveal()).toBe('hunter2-token');
  });

  it('never shows the value in a string, JSON or an inspected object', () => {
    const config = { auth: { token: secret } };
    expect(String(secret)).toBe('***');
    expect(JSON.stringify(config)).toBe('{"auth":{"token":"***"}}');
    expect(inspect(config, { depth: 5 })).not.toContain('hunter2');
    expect(Object.keys(secret)).toEqual([]);
  });
});
