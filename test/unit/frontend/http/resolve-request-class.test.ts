// A request's class from headers and body: the header wins, then the body, then the default; bad values are 400s naming where they came from.
import { describe, expect, it } from 'vitest';
import { badRequest } from '../../../support/bad-request.js';
import { resolveRequestClass } from '../../../../src/frontend/http/resolve-request-class.js';

describe('resolveRequestClass: priority', () => {
  it('takes the x-request-priority header over the body, the body over the default, the default last', () => {
    expect(resolveRequestClass({ 'x-request-priority': '-4' }, { priority: 9 }, 0).priority).toBe(-4);
    expect(resolveRequestClass({}, { priority: 9 }, 0).priority).toBe(9);
    expect(resolveRequestClass({}, { priority: null }, 3).priority).toBe(3);
    expect(resolveRequestClass({}, {}, -2).priority).toBe(-2);
  });

  it('refuses a header that is not an int32, naming the header', () => {
    expect(badRequest(() => resolveRequestClass({ 'x-request-priority': 'high' }, {}, 0))).toMatch(/^header x-request-priority: priority must be an integer/);
    expect(badRequest(() => resolveRequestClass({ 'x-request-priority': '1.5' }, { priority: 1 }, 0))).toContain('x-request-priority');
    expect(badRequest(() => resolveRequestClass({ 'x-request-priority': '2147483648' }, {}, 0))).toContain('between');
    expect(badRequest(() => resolveRequestClass({ 'x-request-priority': '' }, {}, 0))).toContain('x-request-priority');
  });

  it('refuses a header sent twice rather than picking one', () => {
    expect(badRequest(() => resolveRequestClass({ 'x-request-priority': ['1', '2'] }, {}, 0))).toContain('x-request-priority');
  });

  it('refuses a body priority out of int32 range, naming the field', () => {
    expect(badRequest(() => resolveRequestClass({}, { priority: 2 ** 31 }, 0))).toMatch(/^body\/priority: /);
    expect(badRequest(() => resolveRequestClass({}, { priority: 0.5 }, 0))).toMatch(/^body\/priority: /);
  });
});

describe('resolveRequestClass: tenant', () => {
  it('takes x-tenant-id over the body user; none is anonymous', () => {
    expect(resolveRequestClass({ 'x-tenant-id': 'team-a' }, { user: 'alice' }, 0).tenant).toBe('team-a');
    expect(resolveRequestClass({}, { user: 'alice' }, 0).tenant).toBe('alice');
    expect(resolveRequestClass({}, { user: null }, 0).tenant).toBeUndefined();
    expect(resolveRequestClass({}, {}, 0)).toEqual({ priority: 0, tenant: undefined });
  });

  it('refuses tenants checkTenant refuses, naming the header or field', () => {
    expect(badRequest(() => resolveRequestClass({ 'x-tenant-id': 'has space' }, {}, 0))).toMatch(/^header x-tenant-id: /);
    expect(badRequest(() => resolveRequestClass({}, { user: '' }, 0))).toMatch(/^body\/user: tenant must not be empty/);
    expect(badRequest(() => resolveRequestClass({}, { user: 'x'.repeat(257) }, 0))).toMatch(/^body\/user: /);
  });
});
