/**
 * The --openai transport: requests to an OpenAI-compatible server (the frontend, which answers
 * 529 when every worker is busy). The model is --model, or the first of GET /v1/models asked
 * once before the run. Prompts are N common English words drawn from the run's seeded random
 * stream: the frontend's default tokenizer (and the simulated engine) counts one token per
 * whitespace-separated word, and real BPE vocabularies have each of these as one token too.
 */
import type { Random } from '../../platform/prng.js';
import { startHttpAttempt } from './openai-attempt.js';
import type { LoadOptions } from './options.js';
import type { LoadRecorder } from './stats.js';
import { classHeaders, draw, LoadSetupError, type LoadTransport } from './transport.js';

// prettier-ignore
const WORDS = [
  'the', 'of', 'and', 'to', 'in', 'is', 'was', 'for', 'on', 'with', 'as', 'by', 'at', 'from', 'that', 'this',
  'time', 'year', 'people', 'way', 'day', 'man', 'thing', 'woman', 'life', 'child', 'world', 'school', 'state', 'family', 'group', 'country',
  'problem', 'hand', 'part', 'place', 'case', 'week', 'company', 'system', 'program', 'question', 'work', 'number', 'night', 'point', 'home', 'water',
  'room', 'mother', 'area', 'money', 'story', 'fact', 'month', 'lot', 'right', 'study', 'book', 'eye', 'job', 'word', 'business', 'issue',
  'good', 'new', 'first', 'last', 'long', 'great', 'little', 'own', 'other', 'old', 'big', 'high', 'different', 'small', 'large', 'next',
  'early', 'young', 'important', 'few', 'public', 'bad', 'same', 'able', 'make', 'know', 'take', 'see', 'come', 'think', 'look', 'want',
];

/** `length` words from `random`, space-separated. */
export function promptText(length: number, random: Random): string {
  return Array.from({ length }, () => WORDS[Math.floor(random() * WORDS.length)]!).join(' ');
}

const MODELS_TIMEOUT_MS = 10_000;

/** The first model of GET {base}/models; a LoadSetupError saying what to do when there is none. */
export async function firstModel(base: string, signal?: AbortSignal): Promise<string> {
  const url = `${base}/models`;
  const signals = [AbortSignal.timeout(MODELS_TIMEOUT_MS), ...(signal ? [signal] : [])];
  let response: Response;
  try {
    response = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.any(signals) });
  } catch (err) {
    if (signal?.aborted) throw new LoadSetupError(`stopped while listing models at ${url}`);
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const why = typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : (err as Error).message;
    throw new LoadSetupError(`cannot list models at ${url}: ${why}; is the server up? (or name one with --model)`);
  }
  const text = await response.text().catch(() => '');
  if (response.status !== 200) throw new LoadSetupError(`GET ${url} answered HTTP ${response.status}; name the model with --model`);
  let ids: unknown[] = [];
  try {
    const data = (JSON.parse(text) as { data?: unknown }).data;
    if (Array.isArray(data)) ids = data.map((m) => (m as { id?: unknown } | null)?.id);
  } catch {
    throw new LoadSetupError(`GET ${url} did not answer JSON; name the model with --model`);
  }
  const id = ids.find((v): v is string => typeof v === 'string' && v !== '');
  if (id === undefined) throw new LoadSetupError(`GET ${url} lists no models (no worker registered yet?); name one with --model`);
  return id;
}

export async function openAiTransport(options: LoadOptions, random: Random, recorder: LoadRecorder, signal?: AbortSignal): Promise<LoadTransport> {
  const base = options.openai!;
  const model = options.model ?? (await firstModel(base, signal));
  const url = `${base}/${options.api === 'chat' ? 'chat/completions' : 'completions'}`;
  const overloadStatuses = new Set(options.overloadStatuses);
  // The class travels as headers (x-request-priority, x-tenant-id), as over gRPC, so the body is the same with or without it.
  const headers = { 'content-type': 'application/json', accept: options.stream ? 'text/event-stream' : 'application/json', ...classHeaders(options) };
  const streaming = options.stream ? { stream: true, stream_options: { include_usage: true } } : { stream: false };
  return {
    target: url,
    describe: { model, api: options.api },
    prepare() {
      const prompt = promptText(draw(options.promptTokens, random, options.lengthDistribution), random);
      const maxTokens = draw(options.maxTokens, random, options.lengthDistribution);
      const input = options.api === 'chat' ? { messages: [{ role: 'user', content: prompt }] } : { prompt };
      const body = JSON.stringify({ model, ...input, max_tokens: maxTokens, ...streaming });
      const spec = {
        url,
        body,
        headers,
        api: options.api,
        stream: options.stream,
        deadlineMs: options.deadlineMs,
        overloadStatuses,
        retryMaxMs: options.retryMaxMs,
      };
      return () => startHttpAttempt(spec, recorder);
    },
    close: () => {},
  };
}
