/**
 * admit_now, the credit a load event gives frontends: how many more calls the worker admits
 * right now without refusing one.
 *
 *   free slots   = N - engine_request, or 0 while the gate's budget holds a call back
 *                  (hasRoom false: a call arriving now would wait, not run)
 *   queue places = Q - request_queue, of which only those whose call would expect a wait
 *                  within --max-queue-wait-ms (`queuePlaces`), and none while the last refusal
 *                  was one with places left (expected wait, queue timeout): a queued call would
 *                  only be refused again
 *
 * null when admission is off: the sidecar then refuses nothing, so it gives no credit and
 * frontends route it as they would a Dynamo worker (worker-credit.ts).
 */
export interface AdmissionCounts {
  readonly engineRequest: number;
  readonly requestQueue: number;
  readonly limit?: number | undefined;
  readonly queueLimit?: number | undefined;
  readonly hasRoom?: boolean | undefined;
  /** Of the free queue places, those a call would be let into for its expected wait (AdmissionControl.queuePlacesWithinWait); absent: all. */
  readonly queuePlaces?: number | undefined;
}

export function admitNow(counts: AdmissionCounts, queuePlacesRefused: boolean): number | null {
  const { engineRequest, requestQueue, limit, queueLimit, hasRoom, queuePlaces } = counts;
  if (limit === undefined) return null;
  const slots = hasRoom === false ? 0 : Math.max(0, limit - engineRequest);
  const free = queueLimit === undefined ? 0 : Math.max(0, queueLimit - requestQueue);
  const places = queuePlacesRefused ? 0 : Math.min(free, queuePlaces ?? free);
  return slots + places;
}
