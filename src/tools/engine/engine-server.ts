/**
 * grpc-js wiring of the simulated engine: the --protocol's services (wire-protocols.ts) and
 * grpc.health.v1.Health on one server. Generate calls are handed to the {@link EngineCore} (schedulers per dp rank,
 * calls by request id); this file only maps messages, metadata, deadlines, cancels and statuses.
 * Failures are gRPC statuses, as in vLLM's servicer: a response is only ever a chunk or a complete.
 */
import * as grpc from '@grpc/grpc-js';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import type { EngineOptions } from './options.js';
import { effectiveMaxModelLen } from './options.js';
import type { GenerateRequestMessage, GetLoadsResponseMessage } from '../../protocol/engine/engine-proto.js';
import { healthService } from '../../protocol/engine/engine-services.js';
import { DP_RANK_METADATA, InvalidRequestError } from './request.js';
import type { EngineCore, GenerateCall, GenerateSink } from './engine-core.js';
import { protocolServices, type EngineCapacityView, type ProtocolHost } from './wire-protocols.js';

interface GetLoadsRequestMessage {
  dp_rank?: number | null;
  include?: string[];
}

/** What GetLoads reports as the engine's version. */
const LOADS_VERSION = 'simulated';

/** Whether the server answered a call DEADLINE_EXCEEDED (grpc-js's own deadline timer, or the engine's). */
interface DeadlineAnswer {
  sent: boolean;
}

/** Each call's DeadlineAnswer, by the request metadata grpc-js hands the call's handler. */
const deadlineAnswers = new WeakMap<grpc.Metadata, DeadlineAnswer>();

/**
 * grpc-js ends a call past its deadline by itself (its own timer answers DEADLINE_EXCEEDED) and
 * then reports it to the handler as 'cancelled', exactly as it reports a client's RST_STREAM.
 * Comparing Date.now() with the deadline cannot tell the two apart: a Node timer may run before
 * Date.now() reaches the time it was set for (each counts whole milliseconds on its own clock),
 * so grpc-js's own deadline at times came "before" the deadline and counted as a client cancel.
 * grpc-js answers its deadline through the sendStatus of its own call object, which the first
 * interceptor is handed: wrapping it notes the DEADLINE_EXCEEDED before it goes out, and so
 * before the 'cancelled' that follows it.
 */
const noteDeadlineAnswers: grpc.ServerInterceptor = (_method, call) => {
  const answer: DeadlineAnswer = { sent: false };
  const sendStatus = call.sendStatus.bind(call);
  call.sendStatus = (status) => {
    if (status.code === grpc.status.DEADLINE_EXCEEDED) answer.sent = true;
    sendStatus(status);
  };
  return new grpc.ServerInterceptingCall(call, {
    start: (next) =>
      next({
        onReceiveMetadata: (metadata, nextMetadata) => {
          deadlineAnswers.set(metadata, answer);
          nextMetadata(metadata);
        },
      }),
  });
};

/** The project's GrpcStatus and grpc-js's Status share numbering; this is the one place they meet. */
function grpcCode(code: GrpcStatus): grpc.status {
  return code as number;
}

export interface EngineServerDeps {
  readonly options: EngineOptions;
  readonly core: EngineCore;
  readonly now?: () => number;
}

export class EngineServer implements ProtocolHost {
  private readonly server = new grpc.Server({ interceptors: [noteDeadlineAnswers] });
  private readonly watchers = new Set<grpc.ServerWritableStream<{ service: string }, unknown>>();
  private readonly now: () => number;
  private readonly startedAt: number;
  private readonly healthNames: readonly string[];
  private lastReceiveMs = 0;
  private serving = true;
  readonly capacity: EngineCapacityView;

  constructor(private readonly deps: EngineServerDeps) {
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    const o = deps.options;
    this.capacity = {
      modelName: o.modelName,
      dataParallelSize: o.dataParallelSize,
      numGpuBlocks: o.numGpuBlocks,
      blockSize: o.blockSize,
      maxNumSeqs: o.maxNumSeqs,
      maxNumBatchedTokens: o.maxNumBatchedTokens,
      maxModelLen: effectiveMaxModelLen(o),
    };
    const protocol = protocolServices(o.protocol, this);
    for (const { definition, handlers } of protocol.services) this.server.addService(definition, handlers);
    this.healthNames = protocol.healthNames;
    this.server.addService(healthService().service, {
      Check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const status = this.healthStatus(call.request.service);
        if (status === undefined) callback({ code: grpcCode(GrpcStatus.NOT_FOUND), details: `unknown service '${call.request.service}'` });
        else callback(null, { status });
      },
      List: this.unary(() => ({ statuses: Object.fromEntries(['', ...this.healthNames].map((name) => [name, { status: this.healthStatus('') }])) })),
      // The status changes only at shutdown, which ends the stream: one message, then wait.
      Watch: (call: grpc.ServerWritableStream<{ service: string }, unknown>) => {
        this.watchers.add(call);
        call.on('cancelled', () => this.watchers.delete(call));
        call.write({ status: this.healthStatus(call.request.service) ?? 'SERVICE_UNKNOWN' });
      },
    });
  }

  get healthy(): boolean {
    return this.serving;
  }

  get sglangOutput(): EngineOptions['sglangOutput'] {
    return this.deps.options.sglangOutput;
  }

  abort(requestIds: readonly string[]): void {
    this.deps.core.abort(requestIds);
  }

  loadsOf(rank: number | null | undefined): readonly Record<string, unknown>[] {
    return this.deps.core.loads(rank) as unknown as readonly Record<string, unknown>[];
  }

  getLoads(call: grpc.ServerUnaryCall<GetLoadsRequestMessage, unknown>, callback: grpc.sendUnaryData<unknown>): void {
    let loads;
    try {
      loads = this.deps.core.loads(call.request.dp_rank);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) throw error;
      callback({ code: grpcCode(GrpcStatus.INVALID_ARGUMENT), details: error.message });
      return;
    }
    const response: GetLoadsResponseMessage = {
      timestamp: new Date(this.now()).toISOString(),
      version: LOADS_VERSION,
      dp_rank_count: this.deps.core.ranks.length,
      loads,
    };
    callback(null, response);
  }

  /** Binds host:port (0 = free port) and returns the bound port. */
  bind(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (error, bound) => {
        if (error) reject(error);
        else resolve(bound);
      });
    });
  }

  /** Ends in-flight calls with UNAVAILABLE, then shuts the server down (forced after graceMs). */
  async close(graceMs = 1000): Promise<void> {
    this.serving = false;
    this.deps.core.failAll(GrpcStatus.UNAVAILABLE, 'simulated engine shutting down');
    for (const watcher of this.watchers) {
      watcher.write({ status: 'NOT_SERVING' });
      watcher.end();
    }
    this.watchers.clear();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  private unary<T>(answer: () => T): grpc.handleUnaryCall<unknown, T> {
    return (_call, callback) => callback(null, answer());
  }

  private healthStatus(service: string): string | undefined {
    if (service !== '' && !this.healthNames.includes(service)) return undefined;
    return this.serving ? 'SERVING' : 'NOT_SERVING';
  }

  modelInfo(): Record<string, unknown> {
    const o = this.deps.options;
    return {
      model_path: o.modelName,
      is_generation: true,
      max_context_length: effectiveMaxModelLen(o),
      vocab_size: o.vocabSize,
      supports_vision: false,
      num_gpu_blocks: o.numGpuBlocks,
      block_size: o.blockSize,
      max_num_seqs: o.maxNumSeqs,
      max_num_batched_tokens: o.maxNumBatchedTokens,
    };
  }

  serverInfo(): Record<string, unknown> {
    return {
      active_requests: this.deps.core.activeCalls,
      is_paused: false,
      last_receive_timestamp: this.lastReceiveMs / 1000,
      uptime_seconds: (this.now() - this.startedAt) / 1000,
      server_type: 'simulated-vllm-grpc',
      data_parallel_size: this.deps.core.ranks.length,
      ...this.deps.core.serverInfoCounts(),
    };
  }

  generate(
    call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>,
    request: GenerateRequestMessage,
    sink: GenerateSink,
  ): void {
    this.lastReceiveMs = this.now();
    if (!this.serving) {
      sink.fail(GrpcStatus.UNAVAILABLE, 'simulated engine shutting down');
      return;
    }
    const deadline = call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
    const deadlineAnswer = deadlineAnswers.get(call.metadata);
    const rankValue = call.metadata.get(DP_RANK_METADATA)[0];
    let active: GenerateCall;
    try {
      active = this.deps.core.generate(
        request,
        { metadataRank: rankValue === undefined ? undefined : String(rankValue), timeoutMs: deadlineMs - Date.now() },
        sink,
      );
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) throw error;
      sink.fail(GrpcStatus.INVALID_ARGUMENT, error.message);
      return;
    }
    // grpc-js ends a call past its deadline by itself and reports it as cancelled: name it for the
    // waste counters. Past the deadline means DEADLINE_EXCEEDED went out (noteDeadlineAnswers), or
    // the cancel came at or after the deadline (a client that gave up at its deadline).
    call.on('cancelled', () => active.cancel(deadlineAnswer?.sent || Date.now() >= deadlineMs ? 'deadline' : 'cancelled'));
  }
}
