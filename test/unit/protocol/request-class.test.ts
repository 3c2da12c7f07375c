import { describe, expect, it } from 'vitest';
import { MAX_PRIORITY, MIN_PRIORITY, checkPriority, checkTenant, parsePriority, parseSloTtft, tighterSlo } from '../../../src/protocol/request-class.js';

describe('request class', () => {
  it('parses int32 priorities, lower runs sooner', () => {
    expect(parsePriority('0')).toBe(0);
    expect(parsePriority(' -5 ')).toBe(-5);
    expect(parsePriority('+7')).toBe(7);
    expect(parsePriority(String(MAX_PRIORITY))).toBe(MAX_PRIORITY);
    expect(parsePriority(String(MIN_PRIORITY))).toBe(MIN_PRIORITY);
    expect(parsePriority('-0')).toBe(0);
    expect(Object.is(checkPriority(-0), 0)).toBe(true);
  });

  it.each(['', 'high', '1.5', '1e3', '0x10', '2147483648', '-2147483649', '99999999999'])('refuses priority %j with a problem', (text) => {
    expect(parsePriority(text)).toHaveProperty('problem');
  });

  it('refuses non-integer numbers from a JSON body', () => {
    expect(checkPriority(1.5)).toHaveProperty('problem');
    expect(checkPriority(Number.NaN)).toHaveProperty('problem');
    expect(checkPriority(2 ** 40)).toHaveProperty('problem');
  });

  it('takes tenants of visible ASCII up to 256 characters', () => {
    expect(checkTenant('acme-prod_1@eu')).toBe('acme-prod_1@eu');
    expect(checkTenant('x'.repeat(256))).toBe('x'.repeat(256));
    expect(checkTenant('')).toHaveProperty('problem');
    expect(checkTenant('x'.repeat(257))).toHaveProperty('problem');
    expect(checkTenant('two words')).toHaveProperty('problem');
    expect(checkTenant('caf\u00e9')).toHaveProperty('problem');
    expect(checkTenant('a\nb')).toHaveProperty('problem');
  });
});

describe('tighterSlo and parseSloTtft', () => {
  it("lets a request's own SLO tighten the configured one, never loosen it", () => {
    expect(tighterSlo(500, undefined)).toBe(500);
    expect(tighterSlo(500, 200)).toBe(200);
    expect(tighterSlo(500, 900)).toBe(500);
    expect(tighterSlo(null, 900)).toBe(900);
    expect(tighterSlo(undefined, undefined)).toBeUndefined();
    expect(tighterSlo(null, undefined)).toBeUndefined();
  });

  it('reads x-slo-ttft-ms as an integer of ms in 1..a day, else a problem', () => {
    expect(parseSloTtft(' 250 ')).toBe(250);
    for (const bad of ['0', '-1', '1.5', 'soon', '86400001', '']) expect(parseSloTtft(bad)).toHaveProperty('problem');
  });
});
