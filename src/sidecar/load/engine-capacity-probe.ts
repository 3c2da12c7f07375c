/**
 * `--engine-request-limit auto`: the engine's own capacity, asked once from its GetLoads (vLLM's
 * vllm.grpc.engine.VllmEngine and SGLang's sglang.grpc.scheduler.SglangScheduler number
 * SchedulerLoad.max_running_requests 11 alike: vLLM's max_num_seqs, SGLang's
 * max_running_requests, per dp rank). The limit is Dynamo's coming admission gate's default,
 *
 *       N = ceil(AUTO_LIMIT_FACTOR x sum over ranks of max_running_requests)
 *         = ceil(1.5 x max_num_seqs x data_parallel_size)
 *
 * so the engine's own scheduler queue holds the extra half and the sidecar's queue the rest.
 * Asked as an EngineQuestion (until the engine answers, outside the admission gate). An engine
 * without GetLoads, or one that reports no max_running_requests, leaves the limit at
 * AUTO_FALLBACK_LIMIT, with one warning that says to set a number.
 */
import type { GenerateWire } from '../../protocol/engine/generate-wire.js';
import type { Logger } from '../../platform/log.js';
import { AUTO_FALLBACK_LIMIT, AUTO_LIMIT_FACTOR } from '../config/sidecar-config.js';
import { getLoadsPath, getLoadsResponse } from './engine-get-loads.js';
import { EngineQuestion, type QuestionedEngine } from './engine-question.js';

export interface EngineCapacity {
  /** max_running_requests summed over the ranks that report one. */
  readonly maxRunningRequests: number;
  /** Ranks that reported one. */
  readonly ranks: number;
  /** The engine request limit it gives. */
  readonly limit: number;
}

/** The capacity in a GetLoadsResponse, `undefined` when no rank reports max_running_requests; throws on bytes that are not one. */
export function engineCapacity(body: Buffer): EngineCapacity | undefined {
  const response = getLoadsResponse(body);
  let maxRunningRequests = 0;
  let ranks = 0;
  for (const load of response.loads ?? []) {
    if (!Number.isInteger(load.max_running_requests) || load.max_running_requests <= 0) continue;
    maxRunningRequests += load.max_running_requests;
    ranks++;
  }
  return ranks === 0 ? undefined : { maxRunningRequests, ranks, limit: Math.ceil(AUTO_LIMIT_FACTOR * maxRunningRequests) };
}

export interface EngineCapacityProbeOptions {
  readonly engine: QuestionedEngine;
  readonly wire: GenerateWire;
  /** Called once, when the engine reported its capacity. */
  readonly onCapacity: (capacity: EngineCapacity) => void;
  readonly logger: Logger;
  readonly timeoutMs?: number;
  readonly retryMs?: number;
}

export class EngineCapacityProbe extends EngineQuestion {
  constructor(options: EngineCapacityProbeOptions) {
    const path = getLoadsPath(options.wire);
    const log = options.logger;
    const fallback = `the engine request limit stays at ${AUTO_FALLBACK_LIMIT}; set --engine-request-limit to a number`;
    super({
      engine: options.engine,
      path,
      what: 'its capacity (--engine-request-limit auto)',
      logger: log,
      timeoutMs: options.timeoutMs,
      retryMs: options.retryMs,
      decide: (body, attempts) => {
        if (body === undefined) return log.warn(`--engine-request-limit auto: the engine does not implement GetLoads; ${fallback}`, { path });
        let capacity: EngineCapacity | undefined;
        try {
          capacity = engineCapacity(body);
        } catch (err) {
          throw new Error(`undecodable GetLoadsResponse: ${(err as Error).message}`);
        }
        if (!capacity) return log.warn(`--engine-request-limit auto: the engine's GetLoads reports no max_running_requests; ${fallback}`, { path, attempts });
        log.info('engine request limit from the engine (--engine-request-limit auto)', {
          engine_request_limit: capacity.limit,
          max_running_requests: capacity.maxRunningRequests,
          ranks: capacity.ranks,
          factor: AUTO_LIMIT_FACTOR,
          attempts,
        });
        options.onCapacity(capacity);
      },
    });
  }
}
