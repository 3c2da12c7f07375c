/**
 * The stream listeners of every proxied call. This is the per-call hot path, so they are
 * module-level functions that find their call through a symbol on the stream (`this` is the
 * stream that emitted the event), instead of closures allocated for every call.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import type { Permit } from '../admission/gate.js';
import type { DownstreamStream, UpstreamStream } from './call-context.js';

/** The events a proxied call takes from its streams and timers (ProxiedCall implements it). */
export interface CallEvents {
  onAdmitted(permit: Permit): void;
  onDeadline(): void;
  onQueueTimeout(): void;
  onClientGone(): void;
  onClientData(chunk: Buffer): void;
  onClientEnd(): void;
  onClientDrain(): void;
  onClientWantTrailers(): void;
  onEngineResponse(headers: IncomingHttpHeaders, flags: number): void;
  onEngineTrailers(trailers: IncomingHttpHeaders): void;
  onEngineError(err: Error): void;
  onEngineAborted(): void;
  onEngineEnd(): void;
  onEngineClosed(): void;
  onEngineDrain(): void;
  onEngineData(chunk: Buffer): void;
}

export const CALL = Symbol('dynamo-sidecar.call');
export type WithCall<S> = S & { [CALL]: CallEvents };

export function ignore(): void {}
/** For both 'close' and 'aborted' (a reset while our side was open): either way the client is gone. */
export function onClientGone(this: WithCall<DownstreamStream>): void {
  this[CALL].onClientGone();
}
export function onClientData(this: WithCall<DownstreamStream>, chunk: Buffer): void {
  this[CALL].onClientData(chunk);
}
export function onClientEnd(this: WithCall<DownstreamStream>): void {
  this[CALL].onClientEnd();
}
export function onClientDrain(this: WithCall<DownstreamStream>): void {
  this[CALL].onClientDrain();
}
export function onClientWantTrailers(this: WithCall<DownstreamStream>): void {
  this[CALL].onClientWantTrailers();
}
export function onEngineResponse(this: WithCall<UpstreamStream>, headers: IncomingHttpHeaders, flags: number): void {
  this[CALL].onEngineResponse(headers, flags);
}
export function onEngineTrailers(this: WithCall<UpstreamStream>, trailers: IncomingHttpHeaders): void {
  this[CALL].onEngineTrailers(trailers);
}
export function onEngineError(this: WithCall<UpstreamStream>, err: Error): void {
  this[CALL].onEngineError(err);
}
export function onEngineAborted(this: WithCall<UpstreamStream>): void {
  this[CALL].onEngineAborted();
}
export function onEngineEnd(this: WithCall<UpstreamStream>): void {
  this[CALL].onEngineEnd();
}
export function onEngineClose(this: WithCall<UpstreamStream>): void {
  this[CALL].onEngineClosed();
}
export function onEngineDrain(this: WithCall<UpstreamStream>): void {
  this[CALL].onEngineDrain();
}
export function onEngineData(this: WithCall<UpstreamStream>, chunk: Buffer): void {
  this[CALL].onEngineData(chunk);
}

// ---- attaching them, phase by phase ------------------------------------------------------------

/** Once admitted (queued or holding a slot): the client going away ends the call in any phase. */
export function listenForClientGone(down: DownstreamStream): void {
  down.on('close', onClientGone);
  down.on('aborted', onClientGone);
}

/** On dispatch: the engine's whole stream, and the client's request body, which is read only from now on. */
export function listenToEngineAndClientBody(up: UpstreamStream, down: DownstreamStream): void {
  up.on('response', onEngineResponse);
  up.on('trailers', onEngineTrailers);
  up.on('error', onEngineError);
  up.on('aborted', onEngineAborted);
  up.on('close', onEngineClose);
  up.on('end', onEngineEnd);
  up.on('drain', onEngineDrain);
  down.on('data', onClientData);
  down.on('end', onClientEnd);
  down.resume(); // a body read ahead for admission (request-peek.ts) was paused there
}

/** Once the response headers went out: the engine's body, the client's flow control and its trailers. */
export function listenToResponseBody(up: UpstreamStream, down: DownstreamStream): void {
  down.on('wantTrailers', onClientWantTrailers);
  down.on('drain', onClientDrain);
  up.on('data', onEngineData);
}
