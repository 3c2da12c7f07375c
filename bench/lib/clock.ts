/**
 * CLOCK_REALTIME to CLOCK_MONOTONIC: h2load logs request start times as wall-clock microseconds
 * since the epoch, while profiles and the load clients use CLOCK_MONOTONIC. Date.now() has only
 * millisecond resolution, so the offset is taken at the moment Date.now() ticks over to the next
 * millisecond (then it is exact to a few microseconds); that spin costs at most 1 ms.
 */
export function epochToMonotonicOffsetUs(): number {
  const start = Date.now();
  let now = start;
  for (let i = 0; i < 10_000_000 && now === start; i++) now = Date.now();
  const monoUs = Number(process.hrtime.bigint() / 1000n);
  return monoUs - now * 1000;
}
