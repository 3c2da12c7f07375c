/** engine-leg: opening the engine's stream fails per call with the right reason, and our side ends gracefully once the engine answered in full. */
import { constants } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { CallError } from '../../../../src/sidecar/proxy/call-error.js';
import { CALL, type CallEvents } from '../../../../src/sidecar/proxy/call-listeners.js';
import { EngineLeg, openEngineLeg } from '../../../../src/sidecar/proxy/engine-leg.js';
import { ENGINE_UNAVAILABLE_MESSAGE } from '../../../../src/sidecar/proxy/engine-outcome.js';
import type { StreamFaultSink } from '../../../../src/sidecar/proxy/stream-guard.js';
import { FakeConnector, errorWithCode, type FakeUpstream } from '../../../support/fake-call-streams.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const { NGHTTP2_CANCEL } = constants;
const call = {} as CallEvents;
const faults: unknown[] = [];
const sink: StreamFaultSink = { onStreamFault: (_op, err) => faults.push(err) };

function opened(connector = new FakeConnector()): { leg: EngineLeg; stream: FakeUpstream; connector: FakeConnector } {
  const leg = openEngineLeg(connector, { ':path': '/x.Y/Z' }, call, recordingLogger());
  if (leg instanceof CallError) throw leg;
  return { leg, stream: connector.opened[0]!, connector };
}

describe('openEngineLeg', () => {
  it('opens a stream that finds its call, with the headers given', () => {
    const { leg, stream } = opened();
    expect(leg.stream).toBe(stream);
    expect(stream.headers[':path']).toBe('/x.Y/Z');
    expect((stream as unknown as { [CALL]: unknown })[CALL]).toBe(call);
  });

  it('opens nothing while the engine is known down: UNAVAILABLE without the address', () => {
    const connector = Object.assign(new FakeConnector(), { down: true });
    const result = openEngineLeg(connector, {}, call, recordingLogger());
    expect(result).toBeInstanceOf(CallError);
    expect([(result as CallError).kind, (result as CallError).message, connector.opened.length]).toEqual([
      'upstream_unavailable',
      ENGINE_UNAVAILABLE_MESSAGE,
      0,
    ]);
  });

  it('fails only the call, with INVALID_ARGUMENT, for headers node will not send', () => {
    const connector = new FakeConnector();
    connector.failNext = errorWithCode('ERR_HTTP2_INVALID_HEADER_VALUE', 'Invalid value "\\n" for header "x"');
    const result = openEngineLeg(connector, {}, call, recordingLogger()) as CallError;
    expect([result.kind, result.message]).toEqual(['invalid_request', 'request headers cannot be forwarded: Invalid value "\\n" for header "x"']);
  });

  it('answers UNAVAILABLE, keeping the cause for the log, when the stream cannot be opened', () => {
    const connector = new FakeConnector();
    const cause = errorWithCode('ERR_HTTP2_INVALID_SESSION', 'session 10.0.0.7:50051 destroyed');
    connector.failNext = cause;
    const logger = recordingLogger();
    const result = openEngineLeg(connector, {}, call, logger) as CallError;
    expect([result.kind, result.message, result.cause]).toEqual(['upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE, cause]);
    expect(logger.find('call not dispatched: engine stream could not be opened', 'debug')[0]?.fields.error).toBe(cause.message);
  });
});

describe('EngineLeg', () => {
  it('cancels a stream the engine is still working on', () => {
    const { leg, stream } = opened();
    leg.cancel();
    expect(stream.ops).toEqual([`close ${NGHTTP2_CANCEL}`]);
  });

  it('ends our side and never resets once the engine answered in full', () => {
    const { leg, stream } = opened();
    leg.answered(sink);
    leg.cancel();
    expect(stream.ops).toEqual(['end']);
  });

  it('forwards writes and reports a full window', () => {
    const { leg, stream } = opened();
    expect(leg.write(Buffer.alloc(3), sink)).toBe(true);
    stream.writeReturns = false;
    expect(leg.write(Buffer.alloc(4), sink)).toBe(false);
    expect(stream.ops).toEqual(['write 3', 'write 4']);
  });

  it('judges its end by the first error and the session it was opened on', () => {
    const { leg, stream, connector } = opened();
    const first = errorWithCode('ECONNRESET');
    leg.noteError(first);
    leg.noteError(errorWithCode('ERR_HTTP2_STREAM_ERROR'));
    expect(leg.outcome(connector)).toMatchObject({ kind: 'failed', error: { cause: first } });
    connector.session.destroyed = false;
    expect(stream.session).toBe(connector.session);
  });

  it('reads a reset on a live session as the engine reset', () => {
    const { leg, stream, connector } = opened();
    stream.peerReset(constants.NGHTTP2_REFUSED_STREAM);
    expect(leg.outcome(connector)).toMatchObject({ kind: 'reset', code: constants.NGHTTP2_REFUSED_STREAM });
  });
});
