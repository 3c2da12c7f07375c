/**
 * Structured JSON logs, one object per line. Small on purpose: the proxy logs state changes
 * and bursts, never per call, so a full logging library would add weight without use.
 *
 * Every line goes through `redactUrlCredentials`: a password or token in a URL (a NATS server,
 * an engine metrics URL, an error message quoting either) never reaches the log, whoever logs it.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export interface LogSink {
  write(line: string): unknown;
}

export function createLogger(options: { level?: LogLevel; sink?: LogSink; base?: Record<string, unknown>; now?: () => number } = {}): Logger {
  const threshold = LEVELS[options.level ?? 'info'];
  const sink = options.sink ?? process.stderr;
  const base = options.base ?? {};
  const now = options.now ?? Date.now;
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>): void => {
    if (LEVELS[level] < threshold) return;
    sink.write(JSON.stringify({ time: new Date(now()).toISOString(), level, msg, ...base, ...fields }, redactStrings) + '\n');
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ ...options, base: { ...base, ...fields } }),
  };
}

/** A logger that drops everything; for unit tests and library use. */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};

/**
 * `scheme://user:password@` and `scheme://token@` in URLs; the userinfo may not contain
 * whitespace, '/', '@' or ',' (the separator of NATS server lists).
 */
const URL_USERINFO_RE = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@,]+)@/giu;

/**
 * Hides credentials in every URL inside `text`: `nats://user:pass@host` becomes
 * `nats://user:***@host` (the user name helps debugging and is not a secret), and a token,
 * `nats://tok@host`, becomes `nats://***@host`. Text without URLs is returned unchanged.
 */
export function redactUrlCredentials(text: string): string {
  if (!text.includes('@')) return text;
  return text.replace(URL_USERINFO_RE, (_all, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return colon >= 0 ? `${scheme}${userinfo.slice(0, colon)}:***@` : `${scheme}***@`;
  });
}

/** JSON.stringify replacer: redacts every string value, at any depth. */
function redactStrings(_key: string, value: unknown): unknown {
  return typeof value === 'string' ? redactUrlCredentials(value) : value;
}
