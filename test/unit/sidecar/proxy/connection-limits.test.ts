/** Which client resets count against a connection as early (Rapid Reset) resets. */
import { describe, expect, it } from 'vitest';
import { EARLY_RESET_WINDOW_MS, isEarlyReset } from '../../../../src/sidecar/proxy/connection-limits.js';

describe('isEarlyReset', () => {
  it('counts a reset soon after the call arrived, and none after the window', () => {
    expect(isEarlyReset(1000, 1001, undefined)).toBe(true);
    expect(isEarlyReset(1000, 1000 + EARLY_RESET_WINDOW_MS - 1, undefined)).toBe(true);
    expect(isEarlyReset(1000, 1000 + EARLY_RESET_WINDOW_MS, undefined)).toBe(false);
  });

  it('does not count a client giving up at its own deadline, a moment ahead of the sidecar (301 ms deadline, reset at 300 ms)', () => {
    expect(isEarlyReset(0, 300, 301)).toBe(false);
    expect(isEarlyReset(0, 100, 301)).toBe(true);
    // A tiny deadline does not hide a reset sent at once.
    expect(isEarlyReset(0, 0.05, 1)).toBe(true);
  });
});
