/**
 * `dynamo-sidecar load`: runs {@link runLoad} against --target (gRPC) or --openai (HTTP) and
 * prints a summary table (or, with --json, the summary as one JSON object on stdout). Live
 * progress goes to stderr: one redrawn line on a TTY, a plain line per second otherwise,
 * nothing with --quiet. Exit codes: 0 when at least one request completed (or nothing was
 * sent), 1 when every attempt failed or the run could not start (--openai: no model to ask
 * for), 2 for invalid flags. SIGINT/SIGTERM stop early and still print the summary.
 */
import { ConfigError } from '../../platform/config/config-error.js';
import type { Command } from 'commander';
import type { CommandIo } from '../../platform/command-io.js';
import { applyUsageExit, onFirstSignal, processIo, USAGE_EXIT_CODE } from '../../platform/command-io.js';
import { DEFAULT_LOAD_OPTIONS as D, loadOptionsFromCli, type LoadCliValues, type LoadOptions } from './options.js';
import { formatProgress, formatSummary } from './report.js';
import { runLoad } from './run.js';
import { LoadSetupError } from './transport.js';

export interface LoadCommandIo extends CommandIo {
  /** Where progress goes; stderr by default so that --json output stays clean. */
  readonly progress?: { write(text: string): unknown; readonly isTTY?: boolean };
}

export function registerLoadCommand(program: Command, io: LoadCommandIo = { ...processIo, progress: process.stderr }): Command {
  const range = (r: { min: number; max: number }): string => (r.min === r.max ? String(r.min) : `${r.min}-${r.max}`);
  const command = program
    .command('load')
    .description(
      'Drive vLLM Generate calls (vllm.grpc.engine.VllmEngine) at a gRPC target, or chat/completions requests at an OpenAI-compatible HTTP server (--openai), and report TTFT, inter-token latency and rejections',
    )
    .option('--target <host:port>', 'gRPC: engine or sidecar address (this or --openai is required)')
    .option('--openai <url>', 'HTTP: base URL of an OpenAI-compatible server such as the frontend, e.g. http://127.0.0.1:8000 (/v1 optional); excludes --target')
    .option('--model <name>', '--openai: model to ask for (default: the first of GET /v1/models, asked once at start)')
    .option('--api <kind>', '--openai: chat (POST /v1/chat/completions, one user message) or completions (POST /v1/completions) (default: chat)')
    .option(
      '--overload-status <code>',
      '--openai: also count this HTTP status as a rejection, besides 529 (repeatable or comma-separated; e.g. 503 for a frontend run with DYN_HTTP_OVERLOAD_STATUS_CODE=503)',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option('--concurrency <n>', 'closed loop: requests kept in flight (default 1 when --rate is not given)')
    .option('--rate <per-s>', 'open loop: new requests per second, whatever is in flight')
    .option('--arrival <kind>', 'open-loop spacing: poisson or fixed', D.arrival)
    .option('--prompt-tokens <n|min-max>', 'prompt length in tokens, fixed or uniform in a range', range(D.promptTokens))
    .option('--max-tokens <n|min-max>', 'max_tokens per request, fixed or uniform in a range', range(D.maxTokens))
    .option('--duration-s <s>', 'stop starting requests after this many seconds (default 10 when --count is not given)')
    .option('--count <n>', 'stop after this many requests (first attempts); with --duration-s, whichever comes first')
    .option('--seed <n>', 'seed of prompt lengths, token ids (--openai: words), arrivals and backoff jitter', String(D.seed))
    .option('--deadline-ms <ms>', 'gRPC deadline, or HTTP request timeout (--openai), of each attempt (default none)')
    .option(
      '--retry <n>',
      'retries per request on RESOURCE_EXHAUSTED honouring grpc-retry-pushback-ms, or (--openai) on the overload status honouring Retry-After; each attempt counts as sent',
      String(D.retry),
    )
    .option('--retry-max-ms <ms>', 'longest wait before a retry: cap of the exponential backoff and of Retry-After', String(D.retryMaxMs))
    .option('--grace-s <s>', 'after stopping, time given to in-flight calls before they are cancelled', String(D.graceS))
    .option('--no-stream', 'send stream=false (only TTFT is measured, as time to the complete answer)')
    .option('--json', 'print the summary as one JSON object on stdout')
    .option('--quiet', 'no live progress')
    .addHelpText(
      'after',
      `
Examples:
  dynamo-sidecar load --target 127.0.0.1:50050 --concurrency 200 --duration-s 20
  dynamo-sidecar load --openai http://127.0.0.1:8000 --concurrency 64 --duration-s 20

With --openai, requests stream by default ("stream": true with usage); TTFT is the time to the
first chunk with content, HTTP 529 counts as rejected, other statuses as errors HTTP_<code>.`,
    );
  applyUsageExit(command, io);
  command.action(async (raw: LoadCliValues & { json?: boolean; quiet?: boolean }) => {
    let options: LoadOptions;
    try {
      options = loadOptionsFromCli(raw);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      io.stderr.write(`error: ${error.message}\n`);
      io.exit(USAGE_EXIT_CODE);
      return;
    }
    const progressOut: { write(text: string): unknown; readonly isTTY?: boolean } = io.progress ?? io.stderr;
    const tty = progressOut.isTTY === true;
    let drawn = false;
    const onProgress = raw.quiet
      ? undefined
      : (p: Parameters<typeof formatProgress>[0]): void => {
          if (tty) {
            progressOut.write(`\r${formatProgress(p, true)}\x1b[K`);
            drawn = true;
          } else progressOut.write(`${formatProgress(p)}\n`);
        };
    const abort = new AbortController();
    const dispose = onFirstSignal(io, () => abort.abort());
    let summary;
    try {
      summary = await runLoad({ ...options, progressIntervalMs: tty ? 250 : 1000 }, { onProgress, signal: abort.signal });
    } catch (error) {
      if (!(error instanceof LoadSetupError)) throw error;
      io.stderr.write(`error: ${error.message}\n`);
      io.exit(1);
      return;
    } finally {
      dispose();
    }
    if (drawn) progressOut.write('\n');
    const rejectedAs = options.openai === undefined ? undefined : `HTTP ${options.overloadStatuses.join(', ')}`;
    io.stdout.write(raw.json ? `${JSON.stringify(summary)}\n` : formatSummary(summary, rejectedAs));
    io.exit(summary.sent > 0 && summary.completed === 0 ? 1 : 0);
  });
  return command;
}
