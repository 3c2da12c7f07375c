// Retry-After's asctime form is read as GMT whatever the machine's time zone. Here, not among the
// unit tests: it changes this process's zone, which only a test process of its own may do (unit
// tests run in worker threads, whose zone cannot change).
import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../../../src/tools/load/retry.js';

const NOW = Date.parse('2026-01-05T10:00:00Z');

describe('parseRetryAfter in a time zone that is not UTC', () => {
  it('reads an asctime date as GMT, whatever the time zone of the machine', () => {
    const tz = process.env['TZ'];
    process.env['TZ'] = 'America/New_York'; // node applies a TZ change at once, in its main thread
    try {
      expect(new Date(NOW).getHours()).toBe(5);
      expect(parseRetryAfter('Mon Jan 05 10:00:09 2026', NOW)).toBe(9000);
      expect(parseRetryAfter('Mon Jan  5 09:00:00 2026', NOW)).toBe(0);
    } finally {
      if (tz === undefined) delete process.env['TZ'];
      else process.env['TZ'] = tz;
    }
  });
});
