/** The commands' one error exit: every line signed, URL credentials redacted, exit 2 for a refused configuration. */
import { describe, expect, it } from 'vitest';
import { exitWithError, parseOrExit } from '../../../src/platform/command-errors.js';
import { Problems } from '../../../src/platform/config/config-error.js';
import { fakeIo } from '../../support/fake-io.js';

const refuse = (...sentences: [string, string][]): never => {
  const problems = new Problems();
  for (const [source, sentence] of sentences) problems.report(source, sentence);
  problems.check('ERR_SIDECAR_CONFIG');
  throw new Error('unreachable: check() throws when something was reported');
};

describe('parseOrExit', () => {
  it("returns the parse's value and writes nothing when it succeeds", () => {
    const io = fakeIo();
    expect(parseOrExit(io, { prefix: 'x: ' }, () => 42)).toBe(42);
    expect([io.err, io.exits]).toEqual([[], []]);
  });

  it('prints each problem on its own signed line, redacted, and exits 2', () => {
    const io = fakeIo();
    const value = parseOrExit(io, { prefix: 'dynamo-sidecar: ' }, () =>
      refuse(['--a', 'must be set'], ['--nats-url', 'must be x, got "nats://user:secret@host:4222"']),
    );
    expect(value).toBeUndefined();
    expect(io.err).toEqual(['dynamo-sidecar: --a must be set\n', 'dynamo-sidecar: --nats-url must be x, got "nats://user:***@host:4222"\n']);
    expect(io.exits).toEqual([2]);
  });

  it('prints every problem on one line for a one-line voice', () => {
    const io = fakeIo();
    parseOrExit(io, { prefix: 'error: ', oneLine: true }, () => refuse(['--a', ': bad'], ['--b', ': worse']));
    expect(io.err).toEqual(['error: --a: bad; --b: worse\n']);
    expect(io.exits).toEqual([2]);
  });

  it('rethrows anything that is not a ConfigError, without printing or exiting', () => {
    const io = fakeIo();
    expect(() =>
      parseOrExit(io, { prefix: 'x: ' }, () => {
        throw new TypeError('a bug');
      }),
    ).toThrow(TypeError);
    expect([io.err, io.exits]).toEqual([[], []]);
  });
});

describe('exitWithError', () => {
  it('prints one redacted line and exits 1 unless told another code', () => {
    const io = fakeIo();
    exitWithError(io, { prefix: 'dynamo-frontend: ' }, 'cannot start: nats://tok@broker:4222 refused');
    exitWithError(io, { prefix: 'dynamo-frontend: ' }, 'cannot start: no load source', 2);
    expect(io.err).toEqual(['dynamo-frontend: cannot start: nats://***@broker:4222 refused\n', 'dynamo-frontend: cannot start: no load source\n']);
    expect(io.exits).toEqual([1, 2]);
  });
});
