/**
 * `--engine-request-limit auto`: N from the engine's own capacity, as EngineDiscovery learns it
 * (max_num_seqs summed over the worker's dp ranks: SMG's GetLoads max_running_requests, vLLM's
 * Control/GetServerInfo, SGLang's GetServerInfo). The limit is Dynamo's coming admission gate's
 * default,
 *
 *       N = ceil(AUTO_LIMIT_FACTOR x sum over ranks of max_running_requests)
 *         = ceil(1.5 x max_num_seqs x data_parallel_size)
 *
 * so the engine's own scheduler queue holds the extra half and the sidecar's queue the rest. It
 * follows the engine across reconnects (a restarted engine may have another max_num_seqs). An
 * engine that does not tell leaves the limit at AUTO_FALLBACK_LIMIT, with one warning that says
 * to set a number. max_num_seqs is held to --engine-request-limit's range where it is learned
 * (learned-bounds.ts), and N to the same range, so that N x 1.5 past 2^53 cannot make an N the
 * admin API would refuse back.
 */
import type { Logger } from '../../platform/log.js';
import { AUTO_FALLBACK_LIMIT, AUTO_LIMIT_FACTOR, LIVE_SETTINGS } from '../config/sidecar-config.js';
import type { EngineDiscovery } from './engine-discovery.js';

export function autoEngineRequestLimit(maxRunningRequests: number): number {
  return Math.min(LIVE_SETTINGS.engineRequestLimit.max, Math.ceil(AUTO_LIMIT_FACTOR * maxRunningRequests));
}

/** Calls `apply` with each new limit the engine's capacity gives; returns the unsubscribe. */
export function followEngineCapacity(discovery: EngineDiscovery, apply: (limit: number) => void, logger: Logger): () => void {
  let applied: number | undefined;
  let warned = false;
  return discovery.onFacts((facts, { complete, round }) => {
    const maxRunning = facts.maxRunningRequests;
    if (maxRunning === undefined) {
      if (complete && applied === undefined && !warned) {
        warned = true;
        logger.warn(
          `--engine-request-limit auto: the engine did not tell its max_num_seqs (max_running_requests); the engine request limit stays at ${AUTO_FALLBACK_LIMIT}; set --engine-request-limit to a number`,
        );
      }
      return;
    }
    const limit = autoEngineRequestLimit(maxRunning);
    if (limit === applied) return;
    applied = limit;
    logger.info('engine request limit from the engine (--engine-request-limit auto)', {
      engine_request_limit: limit,
      max_running_requests: maxRunning,
      factor: AUTO_LIMIT_FACTOR,
      round,
    });
    apply(limit);
  });
}
