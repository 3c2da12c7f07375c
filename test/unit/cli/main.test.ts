/**
 * The frontend command's surface, in process: --help lists every flag with its env twin, bad
 * values and a missing load source exit 2 naming the flag, Dynamo's tolerated settings warn.
 */
import { describe, expect, it } from 'vitest';
import { argvFor, main } from '../../../src/cli/main.js';
import { FRONTEND_OPTIONS } from '../../../src/frontend/options.js';
import { fakeIo } from '../../support/fake-io.js';

async function run(args: string[], env: Record<string, string> = {}) {
  const io = { ...fakeIo(), env };
  await main(args, io);
  return { out: io.out.join(''), err: io.err.join(''), exits: io.exits };
}

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
    const { err, exits } = await run(['frontend', '--worker', '127.0.0.1:1', '--router-mode', 'fastest', '--active-decode-blocks-threshold', '2'], { DYN_HTTP_PORT: 'x' });
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

  it('the dynamo-frontend bin is the frontend command', () => {
    expect(argvFor('/usr/lib/node_modules/dynamo-sidecar/bin/dynamo-frontend', ['--help'])).toEqual(['frontend', '--help']);
    expect(argvFor('/usr/bin/dynamo-sidecar', ['--help'])).toEqual(['--help']);
  });
});

describe('dynamo-sidecar demo', () => {
  it('refuses a bad worker count or threshold with exit 2', async () => {
    expect((await run(['demo', '--workers', '0'])).exits).toEqual([2]);
    const bad = await run(['demo', '--active-decode-blocks-threshold', '1.5']);
    expect(bad.exits).toEqual([2]);
    expect(bad.err).toContain('--active-decode-blocks-threshold must be a number in 0..1');
  });
});
