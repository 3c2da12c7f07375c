import { describe, expect, it } from 'vitest';
import { parseHostPort } from '../../../../src/platform/config/host-port.js';

describe('parseHostPort', () => {
  it('accepts names, IPv4 and bracketed IPv6; refuses the rest', () => {
    expect(parseHostPort('localhost:1', false)).toEqual({ host: 'localhost', port: 1 });
    expect(parseHostPort('[::1]:0', true)).toEqual({ host: '::1', port: 0 });
    for (const bad of ['::1:80', 'host', ':80', 'host:', 'host:99999', 'a b:1', 'host:-1']) expect(typeof parseHostPort(bad, true)).toBe('string');
  });
});
