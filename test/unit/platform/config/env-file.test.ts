/** The NAME=VALUE settings file: comments, quotes, whitespace, and problems that name the line but never quote a value. */
import { describe, expect, it } from 'vitest';
import { parseEnvFile } from '../../../../src/platform/config/env-file.js';

describe('parseEnvFile', () => {
  it('reads NAME=VALUE lines, skipping blank lines and # comments, trimming around names and values', () => {
    const text = ['# the sidecar', '', 'DYN_ENGINE_REQUEST_LIMIT=32', '  DYN_SIDECAR_RETRY_PUSHBACK_MODE = adaptive  ', '\t# indented comment', 'EMPTY='].join(
      '\n',
    );
    const { file, problems } = parseEnvFile(text, 'sidecar.env');
    expect(problems).toEqual([]);
    expect(file.values).toEqual({ DYN_ENGINE_REQUEST_LIMIT: '32', DYN_SIDECAR_RETRY_PUSHBACK_MODE: 'adaptive', EMPTY: '' });
    expect(file.lines).toEqual({ DYN_ENGINE_REQUEST_LIMIT: 3, DYN_SIDECAR_RETRY_PUSHBACK_MODE: 4, EMPTY: 6 });
  });

  it('drops one pair of matching quotes, keeps a # inside a value and = after the first one, reads CRLF files', () => {
    const { file } = parseEnvFile('A="two words"\r\nB=\'x\'\r\nC=abc#def\r\nD=a=b\r\nE="unbalanced\r\n', 'f');
    expect(file.values).toEqual({ A: 'two words', B: 'x', C: 'abc#def', D: 'a=b', E: '"unbalanced' });
  });

  it('names the file and line of a malformed line or a name given twice, without quoting any value', () => {
    const { file, problems } = parseEnvFile('A=1\nsecret-token-value\nexport B=2\nA=hunter2\n', '/etc/sidecar.env');
    expect(problems.map((p) => p.message)).toEqual([
      '/etc/sidecar.env line 2: expected NAME=VALUE (an environment-variable name) or a # comment',
      '/etc/sidecar.env line 3: expected NAME=VALUE (an environment-variable name) or a # comment',
      '/etc/sidecar.env line 4: A is already set on line 1',
    ]);
    expect(problems.map((p) => p.message).join(' ')).not.toMatch(/secret-token-value|hunter2/);
    expect(file.values).toEqual({ A: '1' });
  });
});
