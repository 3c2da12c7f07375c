/**
 * The frontend command's surface, in process (`dynamo-sidecar frontend`): --help lists every
 * flag with its env twin, bad values and a missing load source exit 2 naming the flag.
 */
import { describe, expect, it } from 'vitest';
import { FRONTEND_OPTIONS } from '../../../src/frontend/options.js';
import { runMain as run } from '../../support/run-main.js';

describe('dynamo-sidecar frontend', () => {
  it('--help lists every option with its env twin and default', async () => {
    const { out, exits } = await run(['frontend', '--help']);
    expect(exits).toEqual([0]);
    for (const spec of Object.values(FRONTEND_OPTIONS)) {
      expect(out).toContain(spec.env);
      if ('flag' in spec) expect(out).toContain(spec.flag.split(' ')[0]);
    }
    expect(out).toContain('DYN_HTTP_OVERLOAD_STATUS_CODE');
  });

  it('exits 2 naming each bad flag or variable, all at once', async () => {
    const { err, exits } = await run(['frontend', '--worker', '127.0.0.1:1', '--router-mode', 'fastest', '--active-decode-blocks-threshold', '2'], {
      DYN_HTTP_PORT: 'x',
    });
    expect(exits).toEqual([2]);
    expect(err).toContain('--router-mode must be one of');
    expect(err).toContain('--active-decode-blocks-threshold must be a number in 0..1');
    expect(err).toContain('DYN_HTTP_PORT must be');
  });

  it('exits 2 when it has no worker and no NATS to learn workers from', async () => {
    const { err, exits } = await run(['frontend', '--http-port', '0', '--http-host', '127.0.0.1']);
    expect(exits).toEqual([2]);
    expect(err).toContain('no workers to route to: give --worker HOST:PORT (repeatable) or --nats-url (NATS_SERVER)');
  });
});
