/**
 * A HuggingFace tokenizer (tokenizer.json, plus tokenizer_config.json beside it when present)
 * through @huggingface/tokenizers, pure JS. Output is decoded incrementally with a sliding
 * window (the method of vLLM's and TGI's detokenizers): decode the ids since the last emitted
 * boundary, and emit only the new suffix, holding it back while it ends in U+FFFD (a
 * multi-byte character whose remaining bytes are in tokens still to come). Decoding the window
 * rather than the whole output keeps it linear, and gives the same text, since a byte-level
 * or metaspace decoder treats the window's first token the same way in both decodes.
 */
import { readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Tokenizer as UntypedTokenizer } from '@huggingface/tokenizers';
import type { PromptTokenizer, TokenDecoder } from './prompt-tokenizer.js';

/**
 * The part of the package's Tokenizer used here (types/core/Tokenizer.d.ts). Its published
 * types do not resolve under NodeNext (extensionless re-exports in an ESM package), so the
 * import arrives untyped; this states what we rely on.
 */
interface HfTokenizer {
  encode(text: string): { ids: number[] };
  decode(ids: number[], options: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean | null }): string;
}
const Tokenizer = UntypedTokenizer as new (tokenizer: object, config: object) => HfTokenizer;

export class TokenizerLoadError extends Error {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`cannot load tokenizer ${path}: ${reason}`);
    this.name = 'TokenizerLoadError';
  }
}

const DECODE_OPTIONS = { skip_special_tokens: true, clean_up_tokenization_spaces: false } as const;
const INCOMPLETE = '\uFFFD';

/** `path` is a tokenizer.json file or a directory holding one. Throws TokenizerLoadError. */
export async function loadHuggingFaceTokenizer(path: string): Promise<PromptTokenizer> {
  const file = await tokenizerFile(path);
  const json = await readJson(file, true);
  const config = (await readJson(join(dirname(file), 'tokenizer_config.json'), false)) ?? {};
  if (typeof json !== 'object' || json === null || typeof (json as { model?: unknown }).model !== 'object') {
    throw new TokenizerLoadError(file, 'not a tokenizer.json (no "model" object)');
  }
  let tokenizer: HfTokenizer;
  try {
    tokenizer = new Tokenizer(json, config);
    tokenizer.encode('probe');
  } catch (error) {
    throw new TokenizerLoadError(file, `invalid tokenizer: ${error instanceof Error ? error.message : String(error)}`);
  }
  return {
    name: `huggingface ${file}`,
    encode: (text) => tokenizer.encode(text).ids,
    // The package encodes a whole text at once: the ids are visited only afterwards.
    eachToken: (text, visit) => {
      for (const id of tokenizer.encode(text).ids) if (!visit(id)) return;
    },
    decoder: () => windowDecoder((ids) => (ids.length === 0 ? '' : tokenizer.decode(ids, DECODE_OPTIONS))),
  };
}

async function tokenizerFile(path: string): Promise<string> {
  try {
    return (await stat(path)).isDirectory() ? join(path, 'tokenizer.json') : path;
  } catch (error) {
    throw new TokenizerLoadError(path, describeFsError(error));
  }
}

/** Parsed JSON of `file`; a missing optional file is undefined. */
async function readJson(file: string, required: boolean): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (!required && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new TokenizerLoadError(file, describeFsError(error));
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new TokenizerLoadError(file, `invalid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function describeFsError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EISDIR') return 'is a directory';
  return error instanceof Error ? error.message : String(error);
}

/** The sliding-window incremental decoder over any `decode(ids)`. */
export function windowDecoder(decode: (ids: number[]) => string): TokenDecoder {
  const ids: number[] = [];
  let prefixOffset = 0;
  let readOffset = 0;
  return {
    push(next) {
      if (next.length === 0) return '';
      ids.push(...next);
      const prefix = decode(ids.slice(prefixOffset, readOffset));
      const full = decode(ids.slice(prefixOffset));
      if (full.length <= prefix.length || full.endsWith(INCOMPLETE)) return '';
      prefixOffset = readOffset;
      readOffset = ids.length;
      return full.slice(prefix.length);
    },
    flush() {
      if (readOffset === ids.length) return '';
      const prefix = decode(ids.slice(prefixOffset, readOffset));
      const full = decode(ids.slice(prefixOffset));
      prefixOffset = readOffset = ids.length;
      return full.length > prefix.length ? full.slice(prefix.length) : '';
    },
  };
}
