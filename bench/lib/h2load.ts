/**
 * h2load driving gRPC unary calls: a pre-framed request body file (5-byte gRPC prefix +
 * message), content-type application/grpc and te: trailers. h2load only judges :status, so
 * gRPC status is counted from the proxy's metrics where it has them. Latency percentiles come
 * from h2load's per-request log file (--log-file: start us since the epoch, status, elapsed us).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { runToEnd } from './spawn.js';
import { distribution, type Distribution } from './stats.js';

export interface H2loadRun {
  readonly port: number;
  readonly path: string;
  readonly bodyFile: string;
  readonly durationMs: number;
  readonly clients: number;
  readonly streamsPerClient: number;
  readonly cpus: string | undefined;
  readonly dir: string;
  readonly headers?: Record<string, string>;
  /** Open loop: requests per second per connection (h2load --rps); closed loop without. */
  readonly rpsPerClient?: number;
}

/** One request from h2load's log. */
export interface H2loadRecord {
  readonly status: number;
  readonly elapsedUs: number;
}

export interface H2loadResult {
  readonly requestsPerSec: number;
  readonly started: number;
  readonly done: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly errored: number;
  readonly status2xx: number;
  readonly status5xx: number;
  /** Responses with a :status other than 2xx. */
  readonly non2xx: number;
  readonly latencyUs: Distribution;
  /** First request start and last response end, wall-clock us since the epoch (from the log). */
  readonly firstStartEpochUs: number;
  readonly lastEndEpochUs: number;
  readonly records: H2loadRecord[];
}

/** Writes a gRPC-framed message of `bytes` bytes for h2load -d. */
export function writeBodyFile(dir: string, bytes: number): string {
  const file = join(dir, `body-${bytes}.bin`);
  writeFileSync(file, frameMessage(Buffer.alloc(bytes, 0x61)));
  return file;
}

let runs = 0;

export async function h2load(run: H2loadRun): Promise<H2loadResult> {
  const logFile = join(run.dir, `h2load-${process.pid}-${runs++}.log`);
  const args = [
    '-D',
    `${Math.round(run.durationMs)}ms`,
    '-c',
    String(run.clients),
    '-m',
    String(run.streamsPerClient),
    '-t',
    '1',
    '-d',
    run.bodyFile,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
    ...Object.entries(run.headers ?? {}).flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
    ...(run.rpsPerClient ? [`--rps=${run.rpsPerClient}`] : []),
    `--log-file=${logFile}`,
    `http://127.0.0.1:${run.port}${run.path}`,
  ];
  const { code, stdout, stderr } = await runToEnd('h2load', 'h2load', args, { cpus: run.cpus, timeoutMs: run.durationMs + 30_000 });
  if (code !== 0) throw new Error(`h2load exited ${code}: ${stderr.slice(-500)} ${stdout.slice(-500)}`);
  const num = (re: RegExp): number => Number(re.exec(stdout)?.[1] ?? NaN);
  const records: H2loadRecord[] = [];
  let firstStartEpochUs = Infinity;
  let lastEndEpochUs = -Infinity;
  // Columns: start (us since the epoch), :status, elapsed us.
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    const cols = line.split('\t');
    if (cols.length < 3) continue;
    const start = Number(cols[0]);
    const us = Number(cols[2]);
    records.push({ status: Number(cols[1]), elapsedUs: us });
    if (start < firstStartEpochUs) firstStartEpochUs = start;
    if (start + us > lastEndEpochUs) lastEndEpochUs = start + us;
  }
  rmSync(logFile, { force: true });
  return {
    requestsPerSec: num(/finished in [\d.]+\w+, ([\d.]+) req\/s/),
    started: num(/requests: \d+ total, (\d+) started/),
    done: num(/requests: \d+ total, \d+ started, (\d+) done/),
    succeeded: num(/(\d+) succeeded/),
    failed: num(/(\d+) failed/),
    errored: num(/(\d+) errored/),
    status2xx: num(/status codes: (\d+) 2xx/),
    status5xx: num(/(\d+) 5xx/),
    non2xx: num(/(\d+) 3xx/) + num(/(\d+) 4xx/) + num(/(\d+) 5xx/),
    latencyUs: distribution(records.map((x) => x.elapsedUs)),
    firstStartEpochUs,
    lastEndEpochUs,
    records,
  };
}
