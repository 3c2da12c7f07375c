/**
 * admit_now, the credit a load event gives frontends: how many more calls the worker admits
 * right now without refusing one.
 *
 *   free slots   = N - engine_request, or 0 while the gate's budget holds a call back
 *                  (hasRoom false: a call arriving now would wait, not run)
 *   queue places = Q - request_queue, or 0 while the last refusal was one with places left
 *                  (expected wait, queue timeout): a queued call would only be refused again
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
}

export function admitNow(counts: AdmissionCounts, queuePlacesRefused: boolean): number | null {
  const { engineRequest, requestQueue, limit, queueLimit, hasRoom } = counts;
  if (limit === undefined) return null;
  const slots = hasRoom === false ? 0 : Math.max(0, limit - engineRequest);
  const places = queuePlacesRefused || queueLimit === undefined ? 0 : Math.max(0, queueLimit - requestQueue);
  return slots + places;
}
