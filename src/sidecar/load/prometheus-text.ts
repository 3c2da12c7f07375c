/**
 * A small, strict parser for the Prometheus text exposition format (0.0.4), tolerant per line:
 * a bad line is skipped and reported, it never fails the whole scrape and never throws.
 *
 *   parsePrometheusText(text) -> { samples: Sample[], problems: string[] }
 *
 * Why our own: the npm candidate (`parse-prometheus-text-format` 1.1.1) has had no release in
 * years, throws on the first malformed line (one bad line from an engine would cost us the
 * whole scrape), returns values as strings and ships no types. What we need is small: sample
 * lines with labels, escaped label values, NaN/±Inf, optional timestamps; HELP/TYPE and other
 * comments are skipped because the engine-metrics mapping keys on metric names only.
 *
 * Grammar handled (https://prometheus.io/docs/instrumenting/exposition_formats/):
 *   name [ "{" label="value" { "," label="value" } [","] "}" ] value [ timestamp ]
 * Label values unescape \\ \" \n. Values follow Go's ParseFloat spellings for NaN/Inf.
 */

export interface Sample {
  name: string;
  labels: Readonly<Record<string, string>>;
  /** May be NaN or ±Infinity; callers decide what a non-finite value means for them. */
  value: number;
  timestampMs?: number;
}

export interface ParsedExposition {
  samples: Sample[];
  /** One entry per skipped line, `line N: reason`, capped at {@link MAX_PROBLEMS} (+1 summary). */
  problems: string[];
}

export const MAX_PROBLEMS = 20;

const NAME_START = /[a-zA-Z_:]/;
const NAME_CHAR = /[a-zA-Z0-9_:]/;
const LABEL_START = /[a-zA-Z_]/;
const LABEL_CHAR = /[a-zA-Z0-9_]/;
const FLOAT = /^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)$/;
const INF = /^[+-]?inf(?:inity)?$/i;
const TIMESTAMP = /^-?\d+$/;

class LineError extends Error {
  override readonly name = 'LineError';
}

export function parsePrometheusText(text: string): ParsedExposition {
  const samples: Sample[] = [];
  const problems: string[] = [];
  let dropped = 0;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#')) continue;
    try {
      samples.push(parseSampleLine(line));
    } catch (err) {
      if (!(err instanceof LineError)) throw err;
      if (problems.length < MAX_PROBLEMS) problems.push(`line ${i + 1}: ${err.message}`);
      else dropped++;
    }
  }
  if (dropped > 0) problems.push(`${dropped} more malformed lines not listed`);
  return { samples, problems };
}

/** Parses a sample value the way Prometheus does; undefined when it is not a number at all. */
export function parseSampleValue(token: string): number | undefined {
  if (FLOAT.test(token)) return Number(token);
  if (INF.test(token)) return token.startsWith('-') ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(token)) return NaN;
  return undefined;
}

function parseSampleLine(line: string): Sample {
  let pos = 0;
  if (!NAME_START.test(line[0]!)) throw new LineError('metric name expected');
  while (pos < line.length && NAME_CHAR.test(line[pos]!)) pos++;
  const name = line.slice(0, pos);
  pos = skipSpaces(line, pos);
  const labels: Record<string, string> = {};
  if (line[pos] === '{') pos = parseLabels(line, pos + 1, labels);
  const rest = line
    .slice(pos)
    .trim()
    .split(/[ \t]+/);
  if (rest.length === 0 || rest[0] === '') throw new LineError(`no value for ${name}`);
  if (rest.length > 2) throw new LineError(`unexpected text after value of ${name}`);
  const value = parseSampleValue(rest[0]!);
  if (value === undefined) throw new LineError(`bad value ${JSON.stringify(rest[0]!.slice(0, 40))} for ${name}`);
  const sample: Sample = { name, labels, value };
  if (rest.length === 2) {
    if (!TIMESTAMP.test(rest[1]!)) throw new LineError(`bad timestamp for ${name}`);
    sample.timestampMs = Number(rest[1]);
  }
  return sample;
}

/** Parses `label="value",...}` starting after '{'; returns the position after '}'. */
function parseLabels(line: string, start: number, into: Record<string, string>): number {
  let pos = skipSpaces(line, start);
  while (line[pos] !== '}') {
    if (pos >= line.length || !LABEL_START.test(line[pos]!)) throw new LineError('label name expected');
    const nameStart = pos;
    while (pos < line.length && LABEL_CHAR.test(line[pos]!)) pos++;
    const label = line.slice(nameStart, pos);
    pos = skipSpaces(line, pos);
    if (line[pos] !== '=') throw new LineError(`'=' expected after label ${label}`);
    pos = skipSpaces(line, pos + 1);
    if (line[pos] !== '"') throw new LineError(`quoted value expected for label ${label}`);
    pos++;
    let value = '';
    for (;;) {
      if (pos >= line.length) throw new LineError(`unterminated value for label ${label}`);
      const c = line[pos++]!;
      if (c === '"') break;
      if (c !== '\\') {
        value += c;
        continue;
      }
      const e = line[pos++];
      if (e === 'n') value += '\n';
      else if (e === '\\' || e === '"') value += e;
      else throw new LineError(`bad escape in label ${label}`);
    }
    if (Object.hasOwn(into, label)) throw new LineError(`duplicate label ${label}`);
    into[label] = value;
    pos = skipSpaces(line, pos);
    if (line[pos] === ',') pos = skipSpaces(line, pos + 1);
    else if (line[pos] !== '}') throw new LineError(`',' or '}' expected after label ${label}`);
  }
  return pos + 1;
}

function skipSpaces(line: string, pos: number): number {
  while (line[pos] === ' ' || line[pos] === '\t') pos++;
  return pos;
}
