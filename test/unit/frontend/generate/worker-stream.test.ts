// WorkerStream over a scripted call: pull order, one end, cancel only while open, and finish's grace on a fake clock.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GenerateResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { FINISH_GRACE_MS, WorkerStream } from '../../../../src/frontend/generate/worker-stream.js';
import { FakeCall, target } from '../../../support/frontend-fakes.js';

const chunk = (id: number): GenerateResponseMessage => ({ chunk: { token_ids: [id], prompt_tokens: 0, completion_tokens: 1, cached_tokens: 0 } });
const OK = { code: GrpcStatus.OK, details: '' };

function setup() {
  const call = new FakeCall(target('1'), { request_id: 'r', stream: true });
  return { call, stream: new WorkerStream(call) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('WorkerStream', () => {
  it('gives messages in arrival order, then the end, which repeats; peek does not consume', async () => {
    const { call, stream } = setup();
    call.send(chunk(1));
    call.send(chunk(2));
    call.end(OK);
    expect(await stream.peek()).toEqual({ kind: 'message', message: chunk(1) });
    expect(await stream.next()).toEqual({ kind: 'message', message: chunk(1) });
    expect(await stream.next()).toEqual({ kind: 'message', message: chunk(2) });
    expect(await stream.next()).toEqual({ kind: 'end', status: OK });
    expect(await stream.next()).toEqual({ kind: 'end', status: OK });
  });

  it('wakes a waiting read when a message or the end arrives', async () => {
    const { call, stream } = setup();
    const first = stream.next();
    call.send(chunk(7));
    expect(await first).toEqual({ kind: 'message', message: chunk(7) });
    const end = stream.peek();
    call.end({ code: GrpcStatus.INTERNAL, details: 'boom' });
    expect(await end).toEqual({ kind: 'end', status: { code: GrpcStatus.INTERNAL, details: 'boom' } });
  });

  it('keeps the first status with its trailers, whatever the call reports after it', async () => {
    const { call, stream } = setup();
    const trailers = { get: (key: string) => (key === 'grpc-retry-pushback-ms' ? ['250'] : []) };
    call.emit('status', { code: GrpcStatus.UNAVAILABLE, details: 'gone', metadata: trailers });
    call.emit('status', OK);
    expect(await stream.next()).toEqual({ kind: 'end', status: { code: GrpcStatus.UNAVAILABLE, details: 'gone', metadata: trailers } });
  });

  it('cancels an open call, never an ended one; queued messages stay readable', async () => {
    const open = setup();
    open.call.send(chunk(1));
    open.stream.cancel();
    expect(open.call.cancelled).toBe(true);
    expect(await open.stream.next()).toEqual({ kind: 'message', message: chunk(1) });
    expect(await open.stream.next()).toMatchObject({ kind: 'end', status: { code: GrpcStatus.CANCELLED } });

    const ended = setup();
    ended.call.end(OK);
    const cancel = vi.spyOn(ended.call, 'cancel');
    ended.stream.cancel();
    expect(cancel).not.toHaveBeenCalled();
  });

  it('finish lets the call end by itself, and cancels it only when it has not ended within the grace', () => {
    vi.useFakeTimers();
    const prompt = setup();
    prompt.stream.finish();
    vi.advanceTimersByTime(FINISH_GRACE_MS - 1);
    prompt.call.end(OK);
    vi.advanceTimersByTime(FINISH_GRACE_MS);
    expect(prompt.call.cancelled).toBe(false);

    const stuck = setup();
    stuck.stream.finish(100);
    vi.advanceTimersByTime(99);
    expect(stuck.call.cancelled).toBe(false);
    vi.advanceTimersByTime(1);
    expect(stuck.call.cancelled).toBe(true);
  });

  it('finish on an ended call sets no timer', () => {
    vi.useFakeTimers();
    const { call, stream } = setup();
    call.end(OK);
    stream.finish();
    expect(vi.getTimerCount()).toBe(0);
  });
});
