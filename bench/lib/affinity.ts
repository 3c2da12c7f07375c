/**
 * CPU placement: with taskset, the proxy under test gets a core of its own and the engine and
 * load generator share the other(s), so the three do not fight blindly over 2 cores. The same
 * placement is used for every target (direct runs leave the proxy core idle).
 */
import { availableParallelism } from 'node:os';

export interface CpuPlan {
  readonly cores: number;
  readonly pinned: boolean;
  /** taskset -c lists; undefined when not pinned. */
  readonly proxy: string | undefined;
  readonly upstream: string | undefined;
  readonly client: string | undefined;
  readonly description: string;
}

export function planCpus(pin: boolean): CpuPlan {
  const cores = availableParallelism();
  if (!pin || cores < 2) {
    return { cores, pinned: false, proxy: undefined, upstream: undefined, client: undefined, description: `not pinned (${cores} cores)` };
  }
  const client = cores >= 3 ? '2' : '1';
  return {
    cores,
    pinned: true,
    proxy: '0',
    upstream: '1',
    client,
    description: `taskset: proxy on CPU 0; upstream on CPU 1; load generator on CPU ${client}`,
  };
}
