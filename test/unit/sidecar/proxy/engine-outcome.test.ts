/** engine-outcome: a stream that closed without trailers is a lost connection or the engine's own reset, and a reset maps to one status. */
import { constants } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { ENGINE_LOST_MESSAGE, ENGINE_UNAVAILABLE_MESSAGE, engineOutcome, statusOfEngineReset } from '../../../../src/sidecar/proxy/engine-outcome.js';
import { FakeSession, errorWithCode } from '../../../support/fake-call-streams.js';

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR, NGHTTP2_ENHANCE_YOUR_CALM } = constants;
const connected = { wasConnected: () => true };
const neverConnected = { wasConnected: () => false };

describe('statusOfEngineReset', () => {
  it.each([
    [NGHTTP2_CANCEL, GrpcStatus.CANCELLED],
    [NGHTTP2_REFUSED_STREAM, GrpcStatus.UNAVAILABLE],
    [NGHTTP2_INTERNAL_ERROR, GrpcStatus.INTERNAL],
    [NGHTTP2_NO_ERROR, GrpcStatus.INTERNAL],
    [NGHTTP2_ENHANCE_YOUR_CALM, GrpcStatus.INTERNAL],
    [0xdead, GrpcStatus.INTERNAL],
  ])('code %i is status %i', (code, status) => expect(statusOfEngineReset(code)).toBe(status));
});

describe('engineOutcome', () => {
  it('is the engine reset, passed on with its code, when the session is alive', () => {
    expect(engineOutcome({ error: undefined, session: new FakeSession(), rstCode: NGHTTP2_REFUSED_STREAM }, connected)).toEqual({
      kind: 'reset',
      code: NGHTTP2_REFUSED_STREAM,
      status: GrpcStatus.UNAVAILABLE,
    });
  });

  it('reads a reset with no code (after our side ended) as NO_ERROR', () => {
    expect(engineOutcome({ error: undefined, session: new FakeSession(), rstCode: undefined }, connected)).toMatchObject({
      kind: 'reset',
      code: NGHTTP2_NO_ERROR,
    });
  });

  it('treats the stream error that accompanies a reset as the reset, not as a lost connection', () => {
    const error = errorWithCode('ERR_HTTP2_STREAM_ERROR');
    expect(engineOutcome({ error, session: new FakeSession(), rstCode: NGHTTP2_INTERNAL_ERROR }, connected)).toMatchObject({
      kind: 'reset',
      code: NGHTTP2_INTERNAL_ERROR,
    });
  });

  it.each([
    ['an error of the session', errorWithCode('ECONNRESET'), new FakeSession()],
    ['a destroyed session', undefined, Object.assign(new FakeSession(), { destroyed: true })],
    ['a closed session', undefined, Object.assign(new FakeSession(), { closed: true })],
    ['no session', undefined, undefined],
  ])('is a lost connection after %s: UNAVAILABLE, the cause kept', (_, error, session) => {
    const outcome = engineOutcome({ error, session, rstCode: undefined }, connected);
    expect(outcome.kind).toBe('failed');
    if (outcome.kind !== 'failed') return;
    expect([outcome.metric, outcome.error.kind, outcome.error.status, outcome.error.message, outcome.error.cause]).toEqual([
      'session_lost',
      'upstream_lost',
      GrpcStatus.UNAVAILABLE,
      ENGINE_LOST_MESSAGE,
      error,
    ]);
  });

  it('is "engine unavailable", counted as a connect failure, when the connection never came up', () => {
    const outcome = engineOutcome({ error: errorWithCode('ECONNREFUSED'), session: new FakeSession(), rstCode: undefined }, neverConnected);
    expect(outcome).toMatchObject({ kind: 'failed', metric: 'connect', error: { kind: 'upstream_unavailable', message: ENGINE_UNAVAILABLE_MESSAGE } });
  });
});
