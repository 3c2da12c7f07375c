/** The demo command's usage errors, in process; the demo itself runs in test/integration/cli/demo.test.ts. */
import { describe, expect, it } from 'vitest';
import { runMain as run } from '../../support/run-main.js';

describe('dynamo-sidecar demo', () => {
  it('refuses a bad worker count or threshold with exit 2', async () => {
    expect((await run(['demo', '--workers', '0'])).exits).toEqual([2]);
    const bad = await run(['demo', '--active-decode-blocks-threshold', '1.5']);
    expect(bad.exits).toEqual([2]);
    expect(bad.err).toContain('--active-decode-blocks-threshold must be a number in 0..1');
  });

  it('redacts URL credentials in the problems it prints, as every command does', async () => {
    const bad = await run(['demo', '--engine-request-limit', 'nats://user:secret@host:4222']);
    expect(bad.exits).toEqual([2]);
    expect(bad.err).toBe('dynamo-sidecar demo: --engine-request-limit must be a positive integer or auto, got "nats://user:***@host:4222"\n');
    expect(bad.err).not.toContain('secret');
  });
});
