/** The one problem dialect: report(source, sentence), then check(code) throws every problem at once. */
import { describe, expect, it } from 'vitest';
import { ConfigError, OptionError, Problems } from '../../../../src/platform/config/config-error.js';

describe('OptionError', () => {
  it('puts the source before the sentence, after a space or directly before a colon', () => {
    expect(new OptionError('--port', 'must be an integer').message).toBe('--port must be an integer');
    expect(new OptionError('DYN_X', ': not HOST:PORT').message).toBe('DYN_X: not HOST:PORT');
    const error = new OptionError('--port', 'must be an integer');
    expect([error.name, error.code, error.flag, error.sentence]).toEqual(['OptionError', 'ERR_CONFIG_OPTION', '--port', 'must be an integer']);
  });
});

describe('Problems', () => {
  it('returns from check when nothing was reported', () => {
    expect(() => new Problems().check('ERR_LOAD_CONFIG')).not.toThrow();
  });

  it('throws one ConfigError with the command code and every problem, in order', () => {
    const problems = new Problems();
    problems.report('--a', 'must be set');
    problems.reportAll([new OptionError('f line 2', ': bad line')]);
    problems.report('--b', ': too big');
    expect(problems.problems).toEqual(['--a must be set', 'f line 2: bad line', '--b: too big']);
    let thrown: unknown;
    try {
      problems.check('ERR_ENGINE_CONFIG');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    const error = thrown as ConfigError;
    expect(error.name).toBe('ConfigError');
    expect(error.code).toBe('ERR_ENGINE_CONFIG');
    expect(error.problems).toEqual(['--a must be set', 'f line 2: bad line', '--b: too big']);
    expect(error.errors.map((e) => e.flag)).toEqual(['--a', 'f line 2', '--b']);
    expect(error.message).toBe('--a must be set; f line 2: bad line; --b: too big');
  });

  it('keeps each command its own code', () => {
    for (const code of ['ERR_SIDECAR_CONFIG', 'ERR_FRONTEND_CONFIG', 'ERR_ENGINE_CONFIG', 'ERR_LOAD_CONFIG', 'ERR_DEMO_CONFIG'] as const) {
      const problems = new Problems();
      problems.report('--x', 'is wrong');
      expect(() => problems.check(code)).toThrow(expect.objectContaining({ code }));
    }
  });

  it('gives copies, so a caller cannot change what was reported', () => {
    const problems = new Problems();
    problems.report('--a', 'is wrong');
    (problems.errors as OptionError[]).length = 0;
    expect(problems.problems).toEqual(['--a is wrong']);
  });
});
