/**
 * The grpc-js test engine (proto/testing/test_engine.proto), run in the test's own process so
 * tests can watch concurrency from inside the engine and release held calls at will.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { join } from 'node:path';
import { PROTO_DIR } from '../../src/protocol/proto-path.js';

export const TEST_ENGINE_PROTO = join(PROTO_DIR, 'testing/test_engine.proto');
export const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true } as const;

export interface EchoRequest {
  payload?: Buffer;
  count?: number;
  reply_bytes?: number;
  tag?: string;
}
export interface EchoReply {
  payload: Buffer;
  index: number;
  tag: string;
}

type Ctor = grpc.ServiceClientConstructor & { service: grpc.ServiceDefinition };

export function loadTestEngine(): { TestEngine: Ctor } {
  const definition = loadSync(TEST_ENGINE_PROTO, LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(definition) as unknown as { dynamo: { sidecar: { testing: { TestEngine: Ctor } } } };
  return pkg.dynamo.sidecar.testing;
}

interface HeldCall {
  tag: string;
  release: () => void;
}

export interface TestEngine {
  readonly port: number;
  readonly address: string;
  /** Calls inside any handler right now, and the most seen at once. */
  readonly active: number;
  readonly maxActive: number;
  /** Tags of Hold calls in the order their handler ran (after the request message arrived). */
  readonly arrivals: readonly string[];
  /**
   * `x-tag` metadata of calls in the order their HEADERS reached the engine: the order the
   * sidecar dispatched them in, which handler order need not keep (messages of different
   * streams may complete in another order).
   */
  readonly headerArrivals: readonly string[];
  /** Called as each `x-tag`ged call's HEADERS reach the engine, once headerArrivals has it: what the engine holds at that moment can be read then. */
  onHeaderArrival?: ((tag: string) => void) | undefined;
  readonly held: number;
  /** Tags of the calls held right now. */
  readonly heldTags: readonly string[];
  /** Messages the Flood handler has handed to grpc-js so far (it waits on 'drain'). */
  readonly floodWritten: number;
  /** Sink calls waiting for releaseSinks(). */
  readonly sinks: number;
  /** Lets every Sink call read its stream; each answers with the message count in `index`. */
  releaseSinks(): void;
  /** Early calls holding right now (see the proto), and how many ended because the client cancelled. */
  readonly early: number;
  readonly earlyCancelled: number;
  /** `x-tag` metadata of the Early calls held right now. */
  readonly earlyTags: readonly string[];
  /** Ends every Early call held right now (sending its headers and replies first if held back). */
  releaseEarly(): number;
  /** Hold calls whose tag this returns true for are answered at once instead of held. */
  autoRelease: (tag: string) => boolean;
  releaseHeld(count?: number): number;
  resetStats(): void;
  close(): Promise<void>;
}

export async function startTestEngine(port = 0, options: grpc.ChannelOptions = {}): Promise<TestEngine> {
  const { TestEngine } = loadTestEngine();
  const headerArrivals: string[] = [];
  const recordHeaders: grpc.ServerInterceptor = (_method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, passOn) => {
            const tag = metadata.get('x-tag')[0];
            if (tag !== undefined) {
              headerArrivals.push(String(tag));
              engine.onHeaderArrival?.(String(tag));
            }
            passOn(metadata);
          },
        }),
    });
  const server = new grpc.Server({
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
    ...options,
    interceptors: [recordHeaders],
  });
  let active = 0;
  let maxActive = 0;
  const arrivals: string[] = [];
  const held: HeldCall[] = [];
  let floodWritten = 0;
  const sinks: (() => void)[] = [];
  const early = new Map<() => void, string>();
  let earlyCancelled = 0;
  const enter = (): (() => void) => {
    active++;
    maxActive = Math.max(maxActive, active);
    let left = false;
    return () => {
      if (!left) {
        left = true;
        active--;
      }
    };
  };
  const reply = (request: EchoRequest, index = 0, bytes?: number): EchoReply => ({
    payload: bytes === undefined ? (request.payload ?? Buffer.alloc(0)) : Buffer.alloc(bytes, 0x61),
    index,
    tag: request.tag ?? '',
  });

  server.addService(TestEngine.service, {
    Unary(call: grpc.ServerUnaryCall<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      const leave = enter();
      leave();
      callback(null, reply(call.request));
    },
    ServerStream(call: grpc.ServerWritableStream<EchoRequest, EchoReply>) {
      const leave = enter();
      call.on('close', leave);
      const count = call.request.count ?? 0;
      for (let i = 0; i < count; i++) call.write(reply(call.request, i, call.request.reply_bytes || undefined));
      call.end();
      leave();
    },
    ClientStream(call: grpc.ServerReadableStream<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      const leave = enter();
      const parts: Buffer[] = [];
      call.on('data', (request: EchoRequest) => parts.push(request.payload ?? Buffer.alloc(0)));
      call.on('end', () => {
        leave();
        callback(null, { payload: Buffer.concat(parts), index: parts.length, tag: '' });
      });
      call.on('error', leave);
    },
    Bidi(call: grpc.ServerDuplexStream<EchoRequest, EchoReply>) {
      const leave = enter();
      let index = 0;
      call.on('data', (request: EchoRequest) => call.write(reply(request, index++)));
      call.on('end', () => {
        leave();
        call.end();
      });
      call.on('error', leave);
    },
    Hold(call: grpc.ServerUnaryCall<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      const leave = enter();
      const tag = call.request.tag ?? '';
      arrivals.push(tag);
      if (engine.autoRelease(tag)) {
        leave();
        return callback(null, reply(call.request));
      }
      const entry: HeldCall = {
        tag,
        release: () => {
          leave();
          callback(null, reply(call.request));
        },
      };
      held.push(entry);
      call.on('cancelled', () => {
        const at = held.indexOf(entry);
        if (at >= 0) held.splice(at, 1);
        leave();
      });
    },
    Fail(call: grpc.ServerUnaryCall<FailRequestShape, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      callback(failure(call.request));
    },
    FailStream(call: grpc.ServerWritableStream<FailRequestShape, EchoReply>) {
      for (let i = 0; i < (call.request.replies_before ?? 0); i++) call.write({ payload: Buffer.from('x'), index: i, tag: '' });
      call.emit('error', failure(call.request));
    },
    EchoMetadata(call: grpc.ServerUnaryCall<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      const echoed = new grpc.Metadata();
      for (const [key, values] of Object.entries(call.metadata.getMap())) {
        if (key.startsWith('x-')) echoed.set(key, values);
      }
      call.sendMetadata(echoed);
      const trailers = new grpc.Metadata();
      for (const [key, value] of Object.entries(call.metadata.getMap())) {
        if (key.startsWith('x-')) trailers.set(`${key.endsWith('-bin') ? key.slice(0, -4) : key}-trailer${key.endsWith('-bin') ? '-bin' : ''}`, value);
      }
      // The payload carries the deadline the engine saw, in ms from now ("Infinity" without one).
      const deadline = call.getDeadline();
      const remainingMs = (deadline instanceof Date ? deadline.getTime() : Number(deadline)) - Date.now();
      callback(null, { payload: Buffer.from(String(remainingMs)), index: 0, tag: '' }, trailers);
    },
    Sink(call: grpc.ServerReadableStream<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      call.pause();
      let messages = 0;
      call.on('data', () => messages++);
      call.on('end', () => callback(null, { payload: Buffer.alloc(0), index: messages, tag: '' }));
      call.on('error', () => {});
      sinks.push(() => call.resume());
    },
    Flood(call: grpc.ServerWritableStream<EchoRequest, EchoReply>) {
      const leave = enter();
      const count = call.request.count ?? 0;
      const message = reply(call.request, 0, call.request.reply_bytes ?? 1024);
      let sent = 0;
      const pump = (): void => {
        while (sent < count) {
          sent++;
          floodWritten++;
          if (!call.write(message)) return void call.once('drain', pump);
        }
        call.end();
        leave();
      };
      call.on('cancelled', leave);
      pump();
    },
    Early(call: grpc.ServerDuplexStream<EchoRequest, EchoReply>) {
      const leave = enter();
      const meta = (key: string): string | undefined => {
        const value = call.metadata.get(key)[0];
        return value === undefined ? undefined : String(value);
      };
      const replies = Number(meta('x-replies') ?? 0);
      const bytes = Number(meta('x-reply-bytes') ?? 16);
      const answer = (): void => {
        call.sendMetadata(new grpc.Metadata());
        for (let i = 0; i < replies; i++) call.write({ payload: Buffer.alloc(bytes, 0x62), index: i, tag: '' });
      };
      if (meta('x-hold-headers') === undefined) answer();
      const release = (): void => {
        early.delete(release);
        if (meta('x-hold-headers') !== undefined) answer();
        call.end();
        leave();
      };
      early.set(release, meta('x-tag') ?? '');
      call.on('cancelled', () => {
        if (early.delete(release)) earlyCancelled++;
        leave();
      });
      call.on('error', () => {});
    },
  });

  const boundPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );

  const engine: TestEngine = {
    autoRelease: () => false,
    port: boundPort,
    address: `127.0.0.1:${boundPort}`,
    get active() {
      return active;
    },
    get maxActive() {
      return maxActive;
    },
    get arrivals() {
      return arrivals;
    },
    get headerArrivals() {
      return headerArrivals;
    },
    get held() {
      return held.length;
    },
    get heldTags() {
      return held.map((h) => h.tag);
    },
    get floodWritten() {
      return floodWritten;
    },
    get sinks() {
      return sinks.length;
    },
    get early() {
      return early.size;
    },
    get earlyCancelled() {
      return earlyCancelled;
    },
    get earlyTags() {
      return [...early.values()];
    },
    releaseEarly() {
      const all = [...early.keys()];
      for (const release of all) release();
      return all.length;
    },
    releaseSinks() {
      for (const resume of sinks.splice(0)) resume();
    },
    releaseHeld(count = Infinity) {
      let released = 0;
      while (held.length && released < count) {
        held.shift()!.release();
        released++;
      }
      return released;
    },
    resetStats() {
      maxActive = active;
      arrivals.length = 0;
      headerArrivals.length = 0;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.forceShutdown();
        resolve();
      });
    },
  };
  return engine;
}

interface FailRequestShape {
  code?: number;
  message?: string;
  details?: Buffer;
  trailers?: Record<string, string>;
  replies_before?: number;
}

function failure(request: FailRequestShape): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(request.trailers ?? {})) {
    if (key.endsWith('-bin')) metadata.set(key, Buffer.from(value, 'utf8'));
    else metadata.set(key, value);
  }
  if (request.details?.length) metadata.set('grpc-status-details-bin', request.details);
  return { code: request.code ?? grpc.status.UNKNOWN, details: request.message ?? '', metadata };
}
