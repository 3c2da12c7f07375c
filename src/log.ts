/**
 * Structured JSON logs, one object per line. Small on purpose: the proxy logs state changes
 * and bursts, never per call, so a full logging library would add weight without use.
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
    sink.write(JSON.stringify({ time: new Date(now()).toISOString(), level, msg, ...base, ...fields }) + '\n');
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
