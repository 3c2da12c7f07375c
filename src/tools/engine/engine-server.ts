/**
 * grpc-js wiring of the simulated engine: vllm.grpc.engine.VllmEngine and grpc.health.v1.Health
 * on one server. Generate calls are handed to the {@link EngineCore} (schedulers per dp rank,
 * calls by request id); this file only maps messages, metadata, deadlines, cancels and statuses.
 * Failures are gRPC statuses, as in vLLM's servicer: a response is only ever a chunk or a complete.
 */
import * as grpc from '@grpc/grpc-js';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import type { EngineOptions } from './options.js';
import { effectiveMaxModelLen } from './options.js';
import type { GenerateRequestMessage, GenerateResponseMessage, GetLoadsResponseMessage } from '../../protocol/engine/engine-proto.js';
import { VLLM_ENGINE_SERVICE } from '../../protocol/engine/engine-proto.js';
import { healthService, vllmEngineService } from '../../protocol/engine/engine-services.js';
import { DP_RANK_METADATA, InvalidRequestError } from './request.js';
import type { EngineCore, GenerateCall, GenerateSink } from './engine-core.js';

type GrpcGenerateCall = grpc.ServerWritableStream<GenerateRequestMessage, GenerateResponseMessage>;

interface GetLoadsRequestMessage {
  dp_rank?: number | null;
  include?: string[];
}

/** What GetLoads reports as the engine's version. */
const LOADS_VERSION = 'simulated';

/** The project's GrpcStatus and grpc-js's Status share numbering; this is the one place they meet. */
function grpcCode(code: GrpcStatus): grpc.status {
  return code as number;
}

export interface EngineServerDeps {
  readonly options: EngineOptions;
  readonly core: EngineCore;
  readonly now?: () => number;
}

export class EngineServer {
  private readonly server = new grpc.Server();
  private readonly watchers = new Set<grpc.ServerWritableStream<{ service: string }, unknown>>();
  private readonly now: () => number;
  private readonly startedAt: number;
  private lastReceiveMs = 0;
  private serving = true;

  constructor(private readonly deps: EngineServerDeps) {
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    this.server.addService(vllmEngineService().service, {
      Generate: (call: GrpcGenerateCall) => this.generate(call),
      HealthCheck: this.unary(() => ({ healthy: this.serving, message: this.serving ? 'ok' : 'shutting down' })),
      Abort: (call: grpc.ServerUnaryCall<{ request_ids?: string[] }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        this.deps.core.abort(call.request.request_ids ?? []);
        callback(null, {});
      },
      GetModelInfo: this.unary(() => this.modelInfo()),
      GetServerInfo: this.unary(() => this.serverInfo()),
      GetLoads: (call: grpc.ServerUnaryCall<GetLoadsRequestMessage, GetLoadsResponseMessage>, callback: grpc.sendUnaryData<GetLoadsResponseMessage>) => {
        let loads;
        try {
          loads = this.deps.core.loads(call.request.dp_rank);
        } catch (error) {
          if (!(error instanceof InvalidRequestError)) throw error;
          callback({ code: grpcCode(GrpcStatus.INVALID_ARGUMENT), details: error.message });
          return;
        }
        callback(null, { timestamp: new Date(this.now()).toISOString(), version: LOADS_VERSION, dp_rank_count: this.deps.core.ranks.length, loads });
      },
    });
    this.server.addService(healthService().service, {
      Check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const status = this.healthStatus(call.request.service);
        if (status === undefined) callback({ code: grpcCode(GrpcStatus.NOT_FOUND), details: `unknown service '${call.request.service}'` });
        else callback(null, { status });
      },
      List: this.unary(() => ({ statuses: { '': { status: this.healthStatus('') }, [VLLM_ENGINE_SERVICE]: { status: this.healthStatus('') } } })),
      // The status changes only at shutdown, which ends the stream: one message, then wait.
      Watch: (call: grpc.ServerWritableStream<{ service: string }, unknown>) => {
        this.watchers.add(call);
        call.on('cancelled', () => this.watchers.delete(call));
        call.write({ status: this.healthStatus(call.request.service) ?? 'SERVICE_UNKNOWN' });
      },
    });
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
    if (service !== '' && service !== VLLM_ENGINE_SERVICE) return undefined;
    return this.serving ? 'SERVING' : 'NOT_SERVING';
  }

  private modelInfo(): Record<string, unknown> {
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

  private serverInfo(): Record<string, unknown> {
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

  private generate(call: GrpcGenerateCall): void {
    this.lastReceiveMs = this.now();
    if (!this.serving) {
      call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'simulated engine shutting down' });
      return;
    }
    const sink: GenerateSink = {
      write: (message) => call.write(message),
      end: () => call.end(),
      fail: (code, details) => call.emit('error', { code, details }),
    };
    const deadline = call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
    const rankValue = call.metadata.get(DP_RANK_METADATA)[0];
    let active: GenerateCall;
    try {
      active = this.deps.core.generate(
        call.request,
        { metadataRank: rankValue === undefined ? undefined : String(rankValue), timeoutMs: deadlineMs - Date.now() },
        sink,
      );
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) throw error;
      call.emit('error', { code: GrpcStatus.INVALID_ARGUMENT, details: error.message });
      return;
    }
    // grpc-js ends a call past its deadline by itself and reports it as cancelled: name it for the waste counters.
    call.on('cancelled', () => active.cancel(Date.now() >= deadlineMs ? 'deadline' : 'cancelled'));
  }
}
