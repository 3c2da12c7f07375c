/** call-listeners: module-level listeners find their call through the stream, and each phase attaches exactly its events. */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { DownstreamStream, UpstreamStream } from '../../../../src/sidecar/proxy/call-context.js';
import { CALL, listenForClientGone, listenToEngineAndClientBody, listenToResponseBody, type CallEvents } from '../../../../src/sidecar/proxy/call-listeners.js';

/** A call that records every event it is told, with its arguments. */
function recordingCall(): CallEvents & { seen: string[] } {
  const seen: string[] = [];
  return new Proxy({ seen } as CallEvents & { seen: string[] }, {
    get: (target, name) => (name === 'seen' ? target.seen : (...args: unknown[]) => seen.push([String(name), ...args.map(String)].join(' '))),
  });
}

function stream(call: CallEvents): EventEmitter & { resumed: number } {
  const emitter = Object.assign(new EventEmitter(), { resumed: 0, resume: () => emitter.resumed++ });
  (emitter as unknown as { [CALL]: CallEvents })[CALL] = call;
  return emitter;
}

describe('call-listeners', () => {
  it('routes both close and aborted of the client to onClientGone', () => {
    const call = recordingCall();
    const down = stream(call);
    listenForClientGone(down as unknown as DownstreamStream);
    down.emit('close');
    down.emit('aborted');
    expect(call.seen).toEqual(['onClientGone', 'onClientGone']);
  });

  it('on dispatch, attaches the whole engine stream and the client body, each to its handler', () => {
    const call = recordingCall();
    const up = stream(call);
    const down = stream(call);
    listenToEngineAndClientBody(up as unknown as UpstreamStream, down as unknown as DownstreamStream);
    expect(up.eventNames().sort()).toEqual(['aborted', 'close', 'drain', 'end', 'error', 'response', 'trailers']);
    expect(down.eventNames().sort()).toEqual(['data', 'end']);
    expect(down.resumed).toBe(1); // a body read ahead for admission was left paused
    up.emit('response', { ':status': 200 }, 4);
    up.emit('trailers', { 'grpc-status': '0' });
    up.emit('error', new Error('e'));
    up.emit('aborted');
    up.emit('end');
    up.emit('close');
    up.emit('drain');
    down.emit('data', 'chunk');
    down.emit('end');
    expect(call.seen).toEqual([
      'onEngineResponse [object Object] 4',
      'onEngineTrailers [object Object]',
      'onEngineError Error: e',
      'onEngineAborted',
      'onEngineEnd',
      'onEngineClosed',
      'onEngineDrain',
      'onClientData chunk',
      'onClientEnd',
    ]);
  });

  it('once the response started, attaches the engine body, the client flow control and its trailers', () => {
    const call = recordingCall();
    const up = stream(call);
    const down = stream(call);
    listenToResponseBody(up as unknown as UpstreamStream, down as unknown as DownstreamStream);
    expect([up.eventNames(), down.eventNames().sort()]).toEqual([['data'], ['drain', 'wantTrailers']]);
    up.emit('data', 'bytes');
    down.emit('drain');
    down.emit('wantTrailers');
    expect(call.seen).toEqual(['onEngineData bytes', 'onClientDrain', 'onClientWantTrailers']);
  });
});
