/**
 * grpc-js wiring of the simulated engine: vllm.grpc.engine.VllmEngine and grpc.health.v1.Health
 * on one server. Calls are turned into scheduler sequences; every way a call can end
 * (finish, client cancel, deadline, shutdown) cancels its sequence exactly once, which
 * frees its KV blocks at once.
 */
import * as grpc from '@grpc/grpc-js';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import type { EngineOptions } from './options.js';
import { effectiveMaxModelLen } from './options.js';
import type { GenerateRequestMessage, GenerateResponseMessage } from '../../protocol/engine/engine-proto.js';
import { healthService, vllmEngineService, VLLM_ENGINE_SERVICE } from '../../protocol/engine/engine-proto.js';
import { InvalidRequestError, parseGenerateRequest } from './request.js';
import type { FinishReason, Scheduler, SequenceHandle } from './scheduler.js';

type GenerateCall = grpc.ServerWritableStream<GenerateRequestMessage, GenerateResponseMessage>;

/** The project's GrpcStatus and grpc-js's Status share numbering; this is the one place they meet. */
function grpcCode(code: GrpcStatus): grpc.status {
  return code as number;
}

interface ActiveCall {
  /** Ends the call with a status (not OK) and drops its sequence; idempotent. */
  fail(code: GrpcStatus, details: string): void;
}

export interface EngineServerDeps {
  readonly options: EngineOptions;
  readonly scheduler: Scheduler;
  readonly now?: () => number;
}

export class EngineServer {
  private readonly server = new grpc.Server();
  private readonly active = new Set<ActiveCall>();
  private readonly watchers = new Set<grpc.ServerWritableStream<{ service: string }, unknown>>();
  private readonly now: () => number;
  private readonly startedAt: number;
  private lastReceiveMs = 0;
  private serving = true;

  constructor(private readonly deps: EngineServerDeps) {
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    this.server.addService(vllmEngineService().service, {
      Generate: (call: GenerateCall) => this.generate(call),
      HealthCheck: this.unary(() => ({ healthy: this.serving, message: this.serving ? 'ok' : 'shutting down' })),
      GetModelInfo: this.unary(() => this.modelInfo()),
      GetServerInfo: this.unary(() => this.serverInfo()),
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

  /** Generate calls accepted and not ended. */
  get activeRequests(): number {
    return this.active.size;
  }

  /** Ends in-flight calls with UNAVAILABLE, then shuts the server down (forced after graceMs). */
  async close(graceMs = 1000): Promise<void> {
    this.serving = false;
    for (const call of [...this.active]) call.fail(GrpcStatus.UNAVAILABLE, 'simulated engine shutting down');
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
    const s = this.deps.scheduler.stats();
    return {
      active_requests: this.active.size,
      is_paused: false,
      last_receive_timestamp: this.lastReceiveMs / 1000,
      uptime_seconds: (this.now() - this.startedAt) / 1000,
      server_type: 'simulated-vllm-grpc',
      num_running: s.running,
      num_waiting: s.waiting,
      kv_used_blocks: s.usedBlocks,
      kv_total_blocks: s.totalBlocks,
    };
  }

  private generate(call: GenerateCall): void {
    this.lastReceiveMs = this.now();
    if (!this.serving) {
      call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'simulated engine shutting down' });
      return;
    }
    let parsed;
    try {
      parsed = parseGenerateRequest(call.request, this.deps.options);
    } catch (error) {
      if (!(error instanceof InvalidRequestError)) throw error;
      call.emit('error', { code: GrpcStatus.INVALID_ARGUMENT, details: error.message });
      return;
    }
    const { requestId, promptIds, stream } = parsed;
    const outputIds: number[] = [];
    let ended = false;
    let deadlineTimer: NodeJS.Timeout | undefined;
    let handle: SequenceHandle | undefined;
    const end = (): void => {
      ended = true;
      this.active.delete(record);
      if (deadlineTimer) clearTimeout(deadlineTimer);
      handle?.cancel();
    };
    const record: ActiveCall = {
      fail: (code, details) => {
        if (ended) return;
        end();
        call.emit('error', { code, details });
      },
    };
    const onTokens = (tokenIds: readonly number[], finish: FinishReason | undefined): void => {
      if (ended) return;
      outputIds.push(...tokenIds);
      const counts = { prompt_tokens: promptIds.length, completion_tokens: outputIds.length, cached_tokens: 0 };
      if (stream) call.write({ chunk: { token_ids: [...tokenIds], ...counts } });
      if (finish) {
        end();
        call.write({ complete: { output_ids: outputIds, finish_reason: finish, ...counts } });
        call.end();
      }
    };
    this.active.add(record);
    call.on('cancelled', end);
    const deadline = call.getDeadline();
    const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
    if (Number.isFinite(deadlineMs)) {
      // grpc-js answers DEADLINE_EXCEEDED itself; this timer makes sure the blocks are freed too.
      deadlineTimer = setTimeout(() => record.fail(GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded'), Math.max(0, deadlineMs - Date.now()));
    }
    handle = this.deps.scheduler.submit({ promptIds, maxTokens: parsed.maxTokens }, onTokens);
    if (ended) handle.cancel();
  }
}
