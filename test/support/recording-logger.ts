/** A Logger that keeps every line in memory, so tests can assert what was logged and how often. */
import type { Logger, LogLevel } from '../../src/platform/log.js';

export interface LogLine {
  readonly level: LogLevel;
  readonly msg: string;
  readonly fields: Record<string, unknown>;
}

export interface RecordingLogger extends Logger {
  readonly lines: LogLine[];
  /** Lines with this message (and, if given, this level). */
  find(msg: string, level?: LogLevel): LogLine[];
}

export function recordingLogger(base: Record<string, unknown> = {}, lines: LogLine[] = []): RecordingLogger {
  const record = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, fields: { ...base, ...fields } });
  return {
    lines,
    find: (msg, level) => lines.filter((line) => line.msg === msg && (level === undefined || line.level === level)),
    debug: record('debug'),
    info: record('info'),
    warn: record('warn'),
    error: record('error'),
    child: (fields) => recordingLogger({ ...base, ...fields }, lines),
  };
}
