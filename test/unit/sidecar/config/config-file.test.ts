// --config-file on its own: readConfigFile (where the path comes from, what is read, every
// problem with its file and line) and fromFile (which settings the file decided, for SIGHUP).
// parseSidecarConfig's use of both is in sidecar-config.test.ts.
import { describe, expect, it } from 'vitest';
import { OptionReader, type Env } from '../../../../src/platform/config/option-reader.js';
import { fromFile, readConfigFile, type ReadConfigFile } from '../../../../src/sidecar/config/config-file.js';
import { SIDECAR_OPTIONS, type RawFlags } from '../../../../src/sidecar/config/options.js';

const files =
  (texts: Record<string, string>, opened: string[] = []) =>
  (path: string): string => {
    opened.push(path);
    const text = texts[path];
    if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${path}'`);
    return text;
  };

function read(flags: RawFlags, env: Env, readFile: (path: string) => string): ReadConfigFile | undefined {
  return readConfigFile(new OptionReader(flags, env, SIDECAR_OPTIONS), readFile);
}

const messages = (file: ReadConfigFile | undefined): string[] => (file?.problems ?? []).map((p) => p.message);

/** What fromFile says for this file text, with the reader parseSidecarConfig builds (the file as the lowest source). */
function decided(text: string, flags: RawFlags = {}, env: Env = {}): string[] {
  const given = { configFile: 'f.env', ...flags };
  const file = read(given, env, files({ 'f.env': text }))!;
  const reader = new OptionReader(given, env, SIDECAR_OPTIONS, { values: file.values, source: (name) => name });
  return fromFile(reader, given, env, file.values);
}

describe('readConfigFile', () => {
  it('is undefined, reading nothing, when no config file is given', () => {
    const opened: string[] = [];
    expect(read({}, {}, files({}, opened))).toBeUndefined();
    expect(read({}, { DYN_SIDECAR_CONFIG_FILE: ' ' }, files({}, opened))).toBeUndefined();
    expect(opened).toEqual([]);
  });

  it('reads the path of the flag, trimmed, over the variable, and returns values with their lines', () => {
    const opened: string[] = [];
    const texts = { '/etc/a.env': '# a\n\nDYN_ENGINE_REQUEST_LIMIT=8\nDYN_SIDECAR_DRAIN_GRACE_MS = "500"\n', '/etc/b.env': '' };
    const file = read({ configFile: '  /etc/a.env ' }, { DYN_SIDECAR_CONFIG_FILE: '/etc/b.env' }, files(texts, opened));
    expect(opened).toEqual(['/etc/a.env']);
    expect(file).toEqual({
      path: '/etc/a.env',
      values: { DYN_ENGINE_REQUEST_LIMIT: '8', DYN_SIDECAR_DRAIN_GRACE_MS: '500' },
      lines: { DYN_ENGINE_REQUEST_LIMIT: 3, DYN_SIDECAR_DRAIN_GRACE_MS: 4 },
      problems: [],
    });
  });

  it('reads the path from DYN_SIDECAR_CONFIG_FILE without the flag', () => {
    expect(read({}, { DYN_SIDECAR_CONFIG_FILE: 'b.env' }, files({ 'b.env': 'DYN_SYSTEM_PORT=0' }))?.values).toEqual({ DYN_SYSTEM_PORT: '0' });
  });

  it('reports an unreadable file against the flag or variable that named it, with no values', () => {
    const byFlag = read({ configFile: '/nope.env' }, {}, files({}));
    expect(byFlag).toMatchObject({ path: '/nope.env', values: {}, lines: {} });
    expect(messages(byFlag)).toEqual([`--config-file: cannot read "/nope.env": ENOENT: no such file or directory, open '/nope.env'`]);
    expect(byFlag?.problems[0]?.flag).toBe('--config-file');
    expect(read({}, { DYN_SIDECAR_CONFIG_FILE: '/nope.env' }, files({}))?.problems[0]?.flag).toBe('DYN_SIDECAR_CONFIG_FILE');
  });

  it('accepts every environment name of the option table', () => {
    const names = Object.values(SIDECAR_OPTIONS)
      .map((spec) => spec.env)
      .filter((name) => name !== 'DYN_SIDECAR_CONFIG_FILE');
    const file = read({ configFile: 'all.env' }, {}, files({ 'all.env': names.map((name) => `${name}=`).join('\n') }));
    expect(file?.problems).toEqual([]);
    expect(Object.keys(file!.values)).toHaveLength(names.length);
  });

  it('names the file and line of each unknown name, suggesting the setting a typo meant', () => {
    const file = read({ configFile: 'f.env' }, {}, files({ 'f.env': 'DYN_SYSTEM_PORT=1\nDYN_SYSTM_PORT=2\nPATH=/bin\nDYN_SOMETHING_ELSE_ENTIRELY=1' }));
    expect(messages(file)).toEqual([
      'f.env line 2: DYN_SYSTM_PORT is not a setting of the sidecar; did you mean DYN_SYSTEM_PORT?',
      'f.env line 3: PATH is not a setting of the sidecar',
      'f.env line 4: DYN_SOMETHING_ELSE_ENTIRELY is not a setting of the sidecar',
    ]);
    expect(file?.problems.map((p) => p.flag)).toEqual(['f.env line 2', 'f.env line 3', 'f.env line 4']);
    // The values are still returned: the caller reports the problems and stops.
    expect(file?.values['PATH']).toBe('/bin');
  });

  it('refuses the file naming a config file itself, even an empty one', () => {
    expect(messages(read({ configFile: 'f.env' }, {}, files({ 'f.env': '\nDYN_SIDECAR_CONFIG_FILE=' })))).toEqual([
      'f.env line 2: DYN_SIDECAR_CONFIG_FILE cannot be set in the config file itself',
    ]);
  });

  it("keeps the parser's problems (malformed and repeated lines) before its own", () => {
    const file = read({ configFile: 'f.env' }, {}, files({ 'f.env': 'DYN_SYSTEM_PORT=1\nDYN_SYSTEM_PORT=2\nexport X\nNOPE=1' }));
    expect(messages(file)).toEqual([
      'f.env line 2: DYN_SYSTEM_PORT is already set on line 1',
      'f.env line 3: expected NAME=VALUE (an environment-variable name) or a # comment',
      'f.env line 4: NOPE is not a setting of the sidecar',
    ]);
  });
});

describe('fromFile', () => {
  it('lists the settings set in the file, in table order', () => {
    expect(decided('DYN_SIDECAR_DRAIN_GRACE_MS=5\nDYN_ENGINE_REQUEST_LIMIT=8\nDYN_SYSTEM_PORT=0')).toEqual([
      'systemPort',
      'engineRequestLimit',
      'drainGraceMs',
    ]);
  });

  it('leaves out a setting the file sets empty (unset, as an empty variable)', () => {
    expect(decided('DYN_ENGINE_REQUEST_LIMIT=\nDYN_SYSTEM_PORT="  "\nDYN_SIDECAR_DRAIN_GRACE_MS=1')).toEqual(['drainGraceMs']);
  });

  it('leaves out a setting a flag gives, or a non-empty variable; an empty variable leaves it to the file', () => {
    const text = 'DYN_ENGINE_REQUEST_LIMIT=8\nDYN_SYSTEM_PORT=0\nDYN_SIDECAR_DRAIN_GRACE_MS=1';
    expect(decided(text, { engineRequestLimit: '4' })).toEqual(['systemPort', 'drainGraceMs']);
    expect(decided(text, {}, { DYN_SYSTEM_PORT: '9', DYN_SIDECAR_DRAIN_GRACE_MS: '' })).toEqual(['engineRequestLimit', 'drainGraceMs']);
  });

  it('counts a switch flag given as false (absent) as not given, and true as given', () => {
    expect(decided('DYN_SIDECAR_UPSTREAM_TLS=true', { upstreamTls: false })).toEqual(['upstreamTls']);
    expect(decided('DYN_SIDECAR_UPSTREAM_TLS=true', { upstreamTls: true })).toEqual([]);
  });

  it('never lists a name that is no setting, nor the config file itself', () => {
    expect(decided('HOME=/root\nDYN_SIDECAR_CONFIG_FILE=x.env\nDYN_SYSTEM_PORT=1')).toEqual(['systemPort']);
  });

  it('lists nothing when the reader does not read the file (no fallback)', () => {
    const values = { DYN_SYSTEM_PORT: '1' };
    expect(fromFile(new OptionReader({}, {}, SIDECAR_OPTIONS), {}, {}, values)).toEqual([]);
  });
});
