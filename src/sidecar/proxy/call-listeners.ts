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
export function onDeadline(this: CallEvents): void {
  this.onDeadline();
}
export function onQueueTimeout(this: CallEvents): void {
  this.onQueueTimeout();
}
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
