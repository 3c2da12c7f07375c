/**
 * `dynamo-sidecar load`: runs {@link runLoad} against --target (gRPC) or --openai (HTTP) and
 * prints a summary table (or, with --json, the summary as one JSON object on stdout). Live
 * progress goes to stderr: one redrawn line on a TTY, a plain line per second otherwise,
 * nothing with --quiet. Exit codes: 0 when at least one request completed (or nothing was
 * sent), 1 when every attempt failed or the run could not start (--openai: no model to ask
 * for), 2 for invalid flags. SIGINT/SIGTERM stop early and still print the summary.
 */
import { Option, type Command } from 'commander';
import { describeOption, type OptionSpec } from '../../platform/config/option-spec.js';
import type { CommandIo } from '../../platform/command-io.js';
import { applyUsageExit, onFirstSignal, processIo } from '../../platform/command-io.js';
import { exitWithError, parseOrExit, type ErrorVoice } from '../../platform/command-errors.js';
import { LOAD_OPTIONS } from './options.js';
import { loadSettingsFromCli, type LoadCliValues } from './cli-options.js';
import { formatProgress, formatSummary } from './report.js';

export interface LoadCommandIo extends CommandIo {
  /** Where progress goes; stderr by default so that --json output stays clean. */
  readonly progress?: { write(text: string): unknown; readonly isTTY?: boolean };
}

const VOICE: ErrorVoice = { prefix: 'error: ', oneLine: true };

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

export function registerLoadCommand(program: Command, io: LoadCommandIo = { ...processIo, progress: process.stderr }): Command {
  const command = program
    .command('load')
    .description(
      'Drive vLLM Generate calls (vllm.grpc.engine.VllmEngine) at a gRPC target, or chat/completions requests at an OpenAI-compatible HTTP server (--openai), and report TTFT, inter-token latency and rejections',
    );
  // No commander defaults: an unset flag must leave its env twin (and then the table's default) to the reader.
  for (const [key, spec] of Object.entries(LOAD_OPTIONS) as [string, OptionSpec & { flag: string }][]) {
    const option = new Option(spec.flag, describeOption(spec));
    command.addOption(key === 'overloadStatus' ? option.argParser(collect) : option);
  }
  command.addHelpText(
    'after',
    `
Every flag has an environment twin (DYN_LOAD_CLIENT_*, shown with it); the flag wins when both are set.

Examples:
  dynamo-sidecar load --target 127.0.0.1:50050 --concurrency 200 --duration-s 20
  dynamo-sidecar load --openai http://127.0.0.1:8000 --concurrency 64 --duration-s 20

With --openai, requests stream by default ("stream": true with usage); TTFT is the time to the
first chunk with content, HTTP 529 counts as rejected (and HTTP 429, a tenant at its in-flight
cap, counted apart as tenant-capped), other statuses as errors HTTP_<code>. --priority and
--tenant go as the x-request-priority and x-tenant-id headers, or gRPC metadata with --target.`,
  );
  applyUsageExit(command, io);
  command.action(async (values: LoadCliValues) => {
    const settings = parseOrExit(io, VOICE, () => loadSettingsFromCli(values, io.env));
    if (settings === undefined) return;
    const { options, json, quiet } = settings;
    const progressOut: { write(text: string): unknown; readonly isTTY?: boolean } = io.progress ?? io.stderr;
    const tty = progressOut.isTTY === true;
    let drawn = false;
    const onProgress = quiet
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
    // Loaded only by the command that runs it (the CLI's commands share one process image).
    const [{ runLoad }, { LoadSetupError }] = await Promise.all([import('./run.js'), import('./transport.js')]);
    try {
      summary = await runLoad({ ...options, progressIntervalMs: tty ? 250 : 1000 }, { onProgress, signal: abort.signal });
    } catch (error) {
      if (!(error instanceof LoadSetupError)) throw error;
      return exitWithError(io, VOICE, error.message);
    } finally {
      dispose();
    }
    if (drawn) progressOut.write('\n');
    const rejectedAs = options.openai === undefined ? undefined : `HTTP ${options.overloadStatuses.join(', ')}`;
    io.stdout.write(json ? `${JSON.stringify(summary)}\n` : formatSummary(summary, rejectedAs));
    io.exit(summary.sent > 0 && summary.completed === 0 ? 1 : 0);
  });
  return command;
}
