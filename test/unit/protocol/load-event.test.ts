/**
 * The load event's wire names: the subject a sidecar publishes on and a frontend reads
 * (segments percent-encoded except [A-Za-z0-9_-], as Dynamo does, and injective), the options
 * naming it (the same table on both commands), and the dp-rank headers.
 */
import { describe, expect, it } from 'vitest';
import { FRONTEND_OPTIONS } from '../../../src/frontend/options.js';
import { mulberry32 } from '../../../src/platform/prng.js';
import {
  DP_RANK_HEADER,
  escapeSubjectToken,
  InvalidSubjectNameError,
  LEGACY_DP_RANK_HEADER,
  LOAD_SUBJECT_OPTIONS,
  loadSubject,
} from '../../../src/protocol/load-event.js';
import { SIDECAR_OPTIONS } from '../../../src/sidecar/config/options.js';

/** Undoes the escaping, from its definition: each %XX is one UTF-8 byte. */
const unescape = (token: string): string =>
  Buffer.from(
    token.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
    'latin1',
  ).toString('utf8');

describe('escapeSubjectToken', () => {
  it.each(['dynamo', 'backend', 'generate', 'My_Model-7B', '0'])('leaves %j unchanged', (name) => {
    expect(escapeSubjectToken(name)).toBe(name);
  });

  it.each([
    ['my.ns', 'my%2Ens'],
    ['gen*', 'gen%2A'],
    ['a>b', 'a%3Eb'],
    ['back end', 'back%20end'],
    ['tab\there', 'tab%09here'],
    ['50%', '50%25'],
    ['llama/3:8b', 'llama%2F3%3A8b'],
    ['é', '%C3%A9'],
    ['🙂', '%F0%9F%99%82'],
  ])('escapes %j as %j (uppercase hex per UTF-8 byte)', (name, escaped) => {
    expect(escapeSubjectToken(name)).toBe(escaped);
  });

  it('refuses an empty name', () => {
    expect(() => escapeSubjectToken('')).toThrow(InvalidSubjectNameError);
    expect(() => escapeSubjectToken('')).toThrow('subject name segment must not be empty');
  });

  it('always yields one NATS token (no dot, wildcard or whitespace), and never the same one for two names', () => {
    const random = mulberry32(2024);
    const alphabet = ['a', 'Z', '9', '_', '-', '.', '*', '>', ' ', '\t', '%', '%2E', 'é', '日', '🙂', '\u0000'];
    const seen = new Map<string, string>();
    for (let i = 0; i < 2000; i++) {
      const name = Array.from({ length: 1 + Math.floor(random() * 6) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      const token = escapeSubjectToken(name);
      expect(token).toMatch(/^[A-Za-z0-9_%-]+$/);
      expect(unescape(token)).toBe(name);
      const other = seen.get(token);
      if (other !== undefined) expect(other).toBe(name);
      seen.set(token, name);
    }
    // A name that already looks escaped stays apart from the name it would decode to.
    expect(escapeSubjectToken('a%2Eb')).not.toBe(escapeSubjectToken('a.b'));
  });
});

describe('loadSubject', () => {
  it("is Dynamo's kv_metrics subject, each segment escaped on its own", () => {
    expect(loadSubject('dynamo', 'backend', 'generate')).toBe('namespace.dynamo.component.backend.endpoint.generate.kv_metrics');
    expect(loadSubject('dyn.amo', 'back end', 'gen*')).toBe('namespace.dyn%2Eamo.component.back%20end.endpoint.gen%2A.kv_metrics');
  });

  it('keeps the three segments apart: moving a dot between names changes the subject', () => {
    expect(loadSubject('a.b', 'c', 'd')).not.toBe(loadSubject('a', 'b.c', 'd'));
    expect(loadSubject('a', 'b', 'c').split('.')).toHaveLength(7);
    expect(loadSubject('a.b', 'c.d', 'e.f').split('.')).toHaveLength(7);
  });

  it('refuses an empty segment, whichever it is', () => {
    expect(() => loadSubject('', 'backend', 'generate')).toThrow(InvalidSubjectNameError);
    expect(() => loadSubject('dynamo', '', 'generate')).toThrow(InvalidSubjectNameError);
    expect(() => loadSubject('dynamo', 'backend', '')).toThrow(InvalidSubjectNameError);
  });
});

describe('LOAD_SUBJECT_OPTIONS', () => {
  it("defaults to Dynamo's names and variables", () => {
    const { namespace, component, endpoint } = LOAD_SUBJECT_OPTIONS;
    expect([namespace.env, component.env, endpoint.env]).toEqual(['DYN_NAMESPACE', 'DYN_COMPONENT', 'DYN_ENDPOINT']);
    expect(loadSubject(namespace.default, component.default, endpoint.default)).toBe('namespace.dynamo.component.backend.endpoint.generate.kv_metrics');
  });

  it('is the same table on the sidecar and the frontend, so both find the same subject from the same flags', () => {
    for (const key of ['namespace', 'component', 'endpoint'] as const) {
      expect(SIDECAR_OPTIONS[key]).toEqual(LOAD_SUBJECT_OPTIONS[key]);
      expect(FRONTEND_OPTIONS[key]).toEqual(LOAD_SUBJECT_OPTIONS[key]);
    }
  });
});

describe('dp rank headers', () => {
  it("are Dynamo's gRPC metadata name and this project's older one, both valid lowercase HTTP/2 names", () => {
    expect(DP_RANK_HEADER).toBe('x-data-parallel-rank');
    expect(LEGACY_DP_RANK_HEADER).toBe('x-dynamo-dp-rank');
    for (const name of [DP_RANK_HEADER, LEGACY_DP_RANK_HEADER]) expect(name).toMatch(/^[a-z0-9-]+$/);
  });
});
