// A tokenizer from its spec: the default one, or a HuggingFace tokenizer.json (what a tokenizer thread loads too).
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadTokenizer } from '../../../../src/frontend/text/load-tokenizer.js';
import { TokenizerLoadError } from '../../../../src/frontend/text/huggingface-tokenizer.js';

const FIXTURE = fileURLToPath(new URL('../../../fixtures/tokenizer', import.meta.url));

describe('loadTokenizer', () => {
  it('loads the default tokenizer and a HuggingFace folder', async () => {
    expect((await loadTokenizer({ kind: 'default' })).name).toMatch(/^default/u);
    const hf = await loadTokenizer({ kind: 'huggingface', path: FIXTURE });
    expect(hf.encode('hello world')).toEqual([14, 19]);
  });

  it('fails with TokenizerLoadError for a path that holds none', async () => {
    await expect(loadTokenizer({ kind: 'huggingface', path: `${FIXTURE}/missing.json` })).rejects.toBeInstanceOf(TokenizerLoadError);
  });
});
