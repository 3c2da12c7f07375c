/**
 * The admin API on the system port: the live admission settings.
 *
 *   GET /admission                      200 {settings..., "state": {...}}
 *   PUT /admission {"engine_request_limit": 4}   200 the new settings and state; only the fields given change
 *
 * Off unless --admin-token (DYN_SIDECAR_ADMIN_TOKEN) is set: then 404 with how to turn it on.
 * When on, every request needs `Authorization: Bearer <token>`: 401 without it (or malformed),
 * 403 with another token (compared in constant time). A body that is not a JSON object, a field
 * of the wrong type or out of range, or an unknown field is 400 naming the field; nothing of a
 * refused body is applied. The token is never logged, nor echoed.
 *
 * Fields (ADMISSION_FIELDS): engine_request_limit (integer >= 1, or null = admission off),
 * request_queue_limit (integer >= 2), request_queue_timeout_ms (0 = none), first_token_limit
 * (integer >= 1, or null = none), max_queue_wait_ms (0 = off), admission_mode (static |
 * adaptive), adaptive_min_limit (integer >= 1), retry_pushback_mode
 * (fixed | adaptive), retry_pushback_ms, retry_pushback_min_ms, retry_pushback_max_ms (min <= max).
 * `state` is read-only: calls in the engine and queued, the pushback a refusal would carry now
 * (before jitter), the recent mean time a call holds a slot, and the last change's source and time.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../platform/log.js';
import { ADMISSION_FIELDS, settingsJson, type AdmissionControl } from '../admission/admission-control.js';
import type { AdmissionGate } from '../admission/gate.js';
import { LIVE_SETTINGS, NULLABLE_SETTINGS, type AdmissionSettings, type LiveSettingKey } from '../config/sidecar-config.js';

export const ADMISSION_PATH = '/admission';
/** A settings body is a few hundred bytes; anything much larger is not one. */
const MAX_BODY_BYTES = 16 * 1024;

export interface AdminApiOptions {
  /** `undefined`: the API is off (404). */
  readonly token: string | undefined;
  readonly control: AdmissionControl;
  readonly gate: Pick<AdmissionGate, 'inEngine' | 'queued'>;
  readonly logger: Logger;
}

export class AdminApi {
  private readonly tokenDigest: Buffer | undefined;

  constructor(private readonly options: AdminApiOptions) {
    this.tokenDigest = options.token === undefined ? undefined : digest(options.token);
  }

  /** Whether `url` (path and query) is this API's; the system server asks before its own routes. */
  handles(url: string | undefined): boolean {
    return (url ?? '/').split('?')[0] === ADMISSION_PATH;
  }

  async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.tokenDigest === undefined) {
      return json(res, 404, {
        error: 'the admin API is off; start the sidecar with --admin-token or DYN_SIDECAR_ADMIN_TOKEN (or the config file) to turn it on',
      });
    }
    const presented = bearerToken(req.headers.authorization);
    if (presented === undefined) {
      res.setHeader('www-authenticate', 'Bearer realm="dynamo-sidecar"');
      return json(res, 401, { error: "send Authorization: Bearer <token> (the sidecar's --admin-token)" });
    }
    if (!timingSafeEqual(digest(presented), this.tokenDigest)) {
      this.options.logger.warn('admin API: request with a wrong token refused', { method: req.method, remote: req.socket.remoteAddress });
      return json(res, 403, { error: 'wrong token' });
    }
    switch (req.method) {
      case 'GET':
        return json(res, 200, this.view());
      case 'PUT':
        return this.put(req, res);
      default:
        res.setHeader('allow', 'GET, PUT');
        return json(res, 405, { error: `${ADMISSION_PATH} takes GET and PUT` });
    }
  }

  private async put(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const type = req.headers['content-type'];
    if (type !== undefined && !/^application\/json\s*(;|$)/iu.test(type)) {
      return json(res, 415, { error: `send JSON with Content-Type: application/json, got "${type}"` });
    }
    const body = await readBody(req, MAX_BODY_BYTES);
    if (body === undefined) return json(res, 413, { error: `body over ${MAX_BODY_BYTES} bytes` });
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch (err) {
      return json(res, 400, { error: `body is not JSON: ${(err as Error).message}` });
    }
    const change = parseChange(parsed);
    if ('error' in change) return json(res, 400, { error: change.error });
    const outcome = this.options.control.change(change.settings, 'api');
    if ('problem' in outcome) return json(res, 400, { error: outcome.problem });
    return json(res, 200, { ...this.view(), changed: outcome.changed.map((key) => ADMISSION_FIELDS[key]) });
  }

  private view(): Record<string, unknown> {
    const { control, gate } = this.options;
    const mean = control.pushback.meanSlotMs;
    return {
      ...settingsJson(control.settings),
      state: {
        engine_request: gate.inEngine,
        request_queue: gate.queued,
        // N in force: the configured limit, or adaptive mode's current one.
        engine_request_limit_in_force: control.limitInForce ?? null,
        retry_pushback_estimate_ms: Math.round(control.pushback.estimateMs()),
        mean_slot_ms: mean === undefined ? null : Math.round(mean),
        last_change: { source: control.lastChange.source, time: new Date(control.lastChange.at).toISOString() },
      },
    };
  }
}

const FIELD_KEYS = new Map((Object.entries(ADMISSION_FIELDS) as [LiveSettingKey, string][]).map(([key, field]) => [field, key]));

/** A partial settings change from a PUT body, every field checked against the same ranges as the flags. */
export function parseChange(body: unknown): { settings: Partial<AdmissionSettings> } | { error: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { error: 'body must be a JSON object of settings' };
  const entries = Object.entries(body);
  const unknown = entries.map(([field]) => field).filter((field) => !FIELD_KEYS.has(field));
  if (unknown.length) {
    const readOnly = unknown.includes('state') ? ' (state is read-only)' : '';
    return { error: `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}${readOnly}; settable: ${[...FIELD_KEYS.keys()].join(', ')}` };
  }
  if (entries.length === 0) return { error: `no setting given; settable: ${[...FIELD_KEYS.keys()].join(', ')}` };
  const settings: Partial<Record<LiveSettingKey, unknown>> = {};
  for (const [field, value] of entries) {
    const key = FIELD_KEYS.get(field)!;
    const rule = LIVE_SETTINGS[key];
    if (NULLABLE_SETTINGS.has(key) && value === null) {
      settings[key] = undefined;
    } else if (Array.isArray(rule)) {
      if (typeof value !== 'string' || !rule.includes(value)) return { error: `${field} must be one of ${rule.join(', ')}, got ${JSON.stringify(value)}` };
      settings[key] = value;
    } else {
      const { min, max } = rule as { min: number; max: number };
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
        const range = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in ${min}..${max}`;
        const orNull = key === 'engineRequestLimit' ? ', or null (admission off)' : NULLABLE_SETTINGS.has(key) ? ', or null (none)' : '';
        return { error: `${field} must be ${range}${orNull}, got ${JSON.stringify(value)}` };
      }
      settings[key] = value;
    }
  }
  return { settings: settings as Partial<AdmissionSettings> };
}

/** The token of `Bearer <token>` (scheme case-insensitive), or undefined when absent or malformed. */
function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer +([\x21-\x7e]+) *$/iu.exec(header ?? '');
  return match?.[1];
}

/** Equal-length digests, so timingSafeEqual neither throws nor leaks the token's length. */
function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      // Too large: answer now, and read the rest into nothing so the answer can go out.
      req.off('data', onData);
      req.resume();
      resolve(undefined);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body) + '\n');
}
