/**
 * The admin API, with Dynamo's semantics (docs/wire-facts.md): GET /busy_threshold lists every
 * served model's thresholds; POST reads (all thresholds null or absent) or sets (any non-null
 * value; null never clears); beyond Dynamo, DELETE /busy_threshold?model=M&check=NAME turns one
 * check off. Each entry also carries `diagnostics.inactive_checks`: configured checks that
 * cannot fire on some worker (e.g. kv_total_blocks unknown), the silent failure Dynamo's
 * troubleshooting section is about. Errors are {"error": "..."} with Dynamo's statuses: 422
 * for a body of the wrong shape, 400 for values out of range, 404 for a model with no workers
 * (for a read too, where Dynamo answers 200 with nulls: docs/frontend.md).
 *
 * Beyond Dynamo, an entry whose model has priority classes carries `priority_threshold_scales`
 * ({"1": 0.8, "5": 0.5}: the scale of every threshold per class, routing/priority-classes.ts);
 * absent, every priority is at scale 1 and the entry is exactly Dynamo's. A POST that gives it
 * (not null) replaces the model's list whole ({} removes every class).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../../platform/log.js';
import { parsePriority } from '../../protocol/request-class.js';
import { BUSY_CHECKS, type BusyCheck, type PriorityScales, type ThresholdApi, type Thresholds, type Router } from '../routing/contracts.js';
import { priorityScalesJson, priorityScalesOf } from '../routing/priority-classes.js';

export interface BusyThresholdDeps {
  readonly router: Router;
  readonly thresholds: ThresholdApi;
  readonly logger: Logger;
}

/** A request that cannot be served, with its status; the body is {"error": message}. */
class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function busyThresholdRoutes(app: FastifyInstance, deps: BusyThresholdDeps, done: (err?: Error) => void): void {
  const { router, thresholds } = deps;
  const entry = (model: string, values: Thresholds = thresholds.get(model)) => {
    const scales = thresholds.priorityScales(model);
    return {
      model,
      active_decode_blocks_threshold: values.active_decode_blocks_threshold,
      active_prefill_tokens_threshold: values.active_prefill_tokens_threshold,
      active_prefill_tokens_threshold_frac: values.active_prefill_tokens_threshold_frac,
      // Only when the model has classes: without any, an entry is exactly Dynamo's.
      ...(scales.length === 0 ? {} : { priority_threshold_scales: priorityScalesJson(scales) }),
      diagnostics: { inactive_checks: router.inactiveChecks(model, values) },
    };
  };
  const requireDiscovered = (model: string, verb: string): void => {
    if (!router.models().includes(model)) throw new AdminError(404, `Model '${model}' not found. Thresholds can only be ${verb} for discovered models.`);
  };

  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    if (error instanceof AdminError) return reply.code(error.status).send({ error: error.message });
    const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    if (status === 500) deps.logger.error('admin request failed', { url: request.url, error: error.message });
    return reply.code(status).send({ error: status === 500 ? 'Internal server error' : error.message });
  });

  app.get('/busy_threshold', () => ({ thresholds: router.models().map((model) => entry(model)) }));

  app.post('/busy_threshold', (request: FastifyRequest, reply: FastifyReply) => {
    if (!isJson(request.headers['content-type'])) {
      return reply.code(415).send({ error: 'Expected request with `Content-Type: application/json`' });
    }
    const { model, changes, scales } = parseSetRequest(request.body);
    const reading = Object.keys(changes).length === 0 && scales === undefined;
    // Dynamo answers a read for such a model 200 with nulls, which reads as "every check off"
    // for a model nothing is routed to; a 404 like its set's says what is true.
    requireDiscovered(model, reading ? 'read' : 'set');
    if (reading) return entry(model);
    if (scales !== undefined) thresholds.setPriorityScales(model, scales);
    return entry(model, Object.keys(changes).length === 0 ? thresholds.get(model) : thresholds.update(model, changes));
  });

  // DELETE takes its model and check from the query: a body means nothing to it (RFC 9110,
  // 9.3.5) and is read only to be ignored, whatever its type and within the body limit, so a
  // client that sends `Content-Type: application/json` on every request is served without one.
  void app.register((scope, _options, registered) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, parsed) => parsed(null, undefined));
    scope.delete('/busy_threshold', (request: FastifyRequest) => {
      const query = request.query as Record<string, unknown>;
      const model = query['model'];
      const check = query['check'];
      if (typeof model !== 'string' || model === '') throw new AdminError(400, 'query parameter `model` is required');
      if (typeof check !== 'string' || !(BUSY_CHECKS as readonly string[]).includes(check)) {
        throw new AdminError(400, `query parameter \`check\` must be one of ${BUSY_CHECKS.join(', ')}, got ${JSON.stringify(check ?? null)}`);
      }
      requireDiscovered(model, 'changed');
      return entry(model, thresholds.disable(model, check as BusyCheck));
    });
    registered();
  });
  done();
}

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/json\s*(;|$)/iu.test(contentType.trim());
}

/** Dynamo's deserialization rules (422) first, then its range checks (400). `scales` undefined: keep the model's. */
function parseSetRequest(body: unknown): { model: string; changes: Partial<Thresholds>; scales: PriorityScales | undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw shapeError('expected a JSON object');
  const fields = body as Record<string, unknown>;
  if (fields['model'] === undefined || fields['model'] === null) throw shapeError('missing field `model`');
  if (typeof fields['model'] !== 'string') throw shapeError('invalid type for `model`: expected a string');
  const changes: { -readonly [K in BusyCheck]?: number } = {};
  const decode = numberField(fields, 'active_decode_blocks_threshold');
  const prefill = numberField(fields, 'active_prefill_tokens_threshold');
  const frac = numberField(fields, 'active_prefill_tokens_threshold_frac');
  const scalePairs = scalesField(fields);
  if (prefill !== undefined && !(Number.isSafeInteger(prefill) && prefill >= 0)) {
    throw shapeError(`invalid value for \`active_prefill_tokens_threshold\`: expected a non-negative integer, got ${prefill}`);
  }
  if (decode !== undefined) {
    if (!(decode >= 0 && decode <= 1)) throw new AdminError(400, `active_decode_blocks_threshold must be between 0.0 and 1.0, got ${decode}`);
    changes.active_decode_blocks_threshold = decode;
  }
  if (prefill !== undefined) changes.active_prefill_tokens_threshold = prefill;
  if (frac !== undefined) {
    if (!(Number.isFinite(frac) && frac >= 0)) throw new AdminError(400, `active_prefill_tokens_threshold_frac must be a finite number >= 0, got ${frac}`);
    changes.active_prefill_tokens_threshold_frac = frac;
  }
  return { model: fields['model'], changes, scales: scalePairs && checkedScales(scalePairs) };
}

const SCALES_FIELD = 'priority_threshold_scales';

/**
 * `priority_threshold_scales`: an object of numbers (422 otherwise), keyed by priorities; null or
 * absent keeps the model's list. Keys that are not int32 integers and scales out of (0, 10] are
 * range errors (400), like the thresholds'.
 */
function scalesField(fields: Record<string, unknown>): [string, number][] | undefined {
  const value = fields[SCALES_FIELD];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw shapeError(`invalid type for \`${SCALES_FIELD}\`: expected an object of priority -> scale, got ${JSON.stringify(value)}`);
  }
  return Object.entries(value).map(([key, scale]) => {
    if (typeof scale !== 'number') throw shapeError(`invalid type for \`${SCALES_FIELD}.${key}\`: expected a number, got ${JSON.stringify(scale)}`);
    return [key, scale];
  });
}

function checkedScales(pairs: readonly [string, number][]): PriorityScales {
  const typed: [number, number][] = [];
  for (const [key, scale] of pairs) {
    const priority = parsePriority(key);
    if (typeof priority !== 'number' || key.trim() !== key)
      throw new AdminError(400, `${SCALES_FIELD} keys must be integer priorities, got ${JSON.stringify(key)}`);
    typed.push([priority, scale]);
  }
  const scales = priorityScalesOf(typed);
  if ('problem' in scales) throw new AdminError(400, `${SCALES_FIELD}: ${scales.problem}`);
  return scales;
}

/** A threshold field: undefined when null or absent; 422 when not a number. */
function numberField(fields: Record<string, unknown>, name: BusyCheck): number | undefined {
  const value = fields[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number') throw shapeError(`invalid type for \`${name}\`: expected a number, got ${JSON.stringify(value)}`);
  return value;
}

function shapeError(reason: string): AdminError {
  return new AdminError(422, `Failed to deserialize the JSON body into the target type: ${reason}`);
}
