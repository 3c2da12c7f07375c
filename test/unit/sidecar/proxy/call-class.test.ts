import { describe, expect, it } from 'vitest';
import { callClassOf } from '../../../../src/sidecar/proxy/call-class.js';
import { CallError } from '../../../../src/sidecar/proxy/call-error.js';

describe('callClassOf', () => {
  it('gives a call without metadata the default priority and no tenant', () => {
    expect(callClassOf({}, 0)).toEqual({ priority: 0, tenant: '' });
    expect(callClassOf({}, 3)).toEqual({ priority: 3, tenant: '' });
    expect(callClassOf({}, 3)).toBe(callClassOf({}, 3));
  });

  it('reads x-request-priority and x-tenant-id', () => {
    expect(callClassOf({ 'x-request-priority': '-2', 'x-tenant-id': 'acme' }, 0)).toEqual({ priority: -2, tenant: 'acme' });
    expect(callClassOf({ 'x-tenant-id': 'acme' }, 5)).toEqual({ priority: 5, tenant: 'acme' });
    expect(callClassOf({ 'x-request-priority': '7' }, 5)).toEqual({ priority: 7, tenant: '' });
  });

  it.each([
    [{ 'x-request-priority': 'high' }, /x-request-priority.*integer/],
    [{ 'x-request-priority': '1, 2' }, /x-request-priority/],
    [{ 'x-request-priority': '4294967296' }, /between/],
    [{ 'x-tenant-id': 'a b' }, /x-tenant-id.*visible ASCII/],
    [{ 'x-tenant-id': 'x'.repeat(300) }, /x-tenant-id.*256/],
  ])('refuses %j with INVALID_ARGUMENT saying why', (headers, message) => {
    const outcome = callClassOf(headers, 0);
    expect(outcome).toBeInstanceOf(CallError);
    expect((outcome as CallError).status).toBe(3);
    expect((outcome as CallError).message).toMatch(message);
  });
});
