import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { detectFormat, parseEngineMetrics } from '../../../../src/sidecar/load/engine-metrics-reader.js';
import { parsePrometheusText } from '../../../../src/sidecar/load/prometheus-text.js';

const fixture = (name: string): string => readFileSync(new URL(`../../../fixtures/engine-metrics/${name}`, import.meta.url), 'utf8');

describe('parsePrometheusText', () => {
  it('reads labels, escaped label values, special values and timestamps', () => {
    const { samples, problems } = parsePrometheusText(
      [
        '# HELP a_metric help with \\n escape',
        'a_metric{x="1", y="q\\"uo\\\\te\\nnl",} 1.5e3 1718000000000',
        'b NaN',
        'c{} +Inf',
        'd -Inf',
        'e .5',
        '   ',
      ].join('\n'),
    );
    expect(problems).toEqual([]);
    expect(samples[0]).toEqual({ name: 'a_metric', labels: { x: '1', y: 'q"uo\\te\nnl' }, value: 1500, timestampMs: 1718000000000 });
    expect(samples[1]!.value).toBeNaN();
    expect(samples.slice(2).map((s) => s.value)).toEqual([Infinity, -Infinity, 0.5]);
  });

  it('skips each malformed line with its line number and keeps the rest', () => {
    const { samples, problems } = parsePrometheusText('ok 1\nbad{a="1" 2\nno_value\nx 0x10\ny{a="1",a="2"} 1\nz 1 2 3\nok2 2');
    expect(samples.map((s) => s.name)).toEqual(['ok', 'ok2']);
    expect(problems).toHaveLength(5);
    expect(problems[0]).toMatch(/^line 2: /);
    expect(problems[2]).toMatch(/line 4: bad value "0x10"/);
    expect(problems[3]).toMatch(/duplicate label a/);
  });

  it('caps the problem list so a garbage body cannot flood logs', () => {
    const { problems } = parsePrometheusText(Array.from({ length: 100 }, () => '!!!').join('\n'));
    expect(problems).toHaveLength(21);
    expect(problems[20]).toBe('80 more malformed lines not listed');
  });
});

describe('parseEngineMetrics', () => {
  it('maps vLLM per dp rank from the engine label, used blocks = round(perc * num_gpu_blocks)', () => {
    const r = parseEngineMetrics(fixture('vllm.txt'));
    expect(r.format).toBe('vllm');
    expect(r.problems).toEqual([]);
    expect([...r.ranks.keys()]).toEqual([0, 1]);
    expect(r.ranks.get(0)).toEqual({ kvUsagePerc: 0.25, kvTotalBlocks: 4096, kvUsedBlocks: 1024, blockSize: 16, running: 7, waiting: 2 });
    expect(r.ranks.get(1)).toEqual({ kvUsagePerc: 0.0625, kvTotalBlocks: 4096, kvUsedBlocks: 256, blockSize: 16, running: 3, waiting: 0 });
  });

  it('maps SGLang pages to blocks', () => {
    const r = parseEngineMetrics(fixture('sglang.txt'));
    expect(r.format).toBe('sglang');
    expect(r.problems).toEqual([]);
    expect(r.ranks.get(0)).toEqual({ blockSize: 16, kvTotalBlocks: 5000, kvUsedBlocks: 1250, kvUsagePerc: 0.25, running: 12, waiting: 4 });
  });

  it('maps TensorRT-LLM on Triton block metrics', () => {
    const r = parseEngineMetrics(fixture('trtllm-triton.txt'));
    expect(r.format).toBe('trtllm-triton');
    expect(r.problems).toEqual([]);
    expect(r.ranks.get(0)).toEqual({ kvTotalBlocks: 1200, kvUsedBlocks: 300, kvUsagePerc: 0.25, blockSize: 64 });
  });

  it('derives Triton used blocks from max - free when used is absent', () => {
    const text = fixture('trtllm-triton.txt').replace(/^.*kv_cache_block_type="used".*$/m, '');
    expect(parseEngineMetrics(text).ranks.get(0)).toMatchObject({ kvUsedBlocks: 300, kvTotalBlocks: 1200 });
  });

  it('maps trtllm-serve utilization and ignores sample timestamps', () => {
    const r = parseEngineMetrics(fixture('trtllm-serve.txt'));
    expect(r.format).toBe('trtllm-serve');
    expect(r.problems).toEqual([]);
    expect(r.ranks.get(0)).toEqual({ kvUsagePerc: 0.5, kvTotalBlocks: 2000, kvUsedBlocks: 1000, blockSize: 32 });
  });

  it('auto-detects each engine from its metric names', () => {
    for (const [file, format] of [
      ['vllm.txt', 'vllm'],
      ['sglang.txt', 'sglang'],
      ['trtllm-triton.txt', 'trtllm-triton'],
      ['trtllm-serve.txt', 'trtllm-serve'],
    ] as const) {
      expect(detectFormat(parsePrometheusText(fixture(file)).samples)).toBe(format);
    }
  });

  it('turns NaN, +Inf and "None" into undefined fields with a reason each', () => {
    const r = parseEngineMetrics(fixture('vllm-nan.txt'), 'vllm');
    expect(r.ranks.get(0)).toEqual({ blockSize: 16, running: 0 });
    expect(r.problems).toEqual([
      'vllm:kv_cache_usage_perc (rank 0): value NaN is not a ratio in 0..1',
      'vllm:cache_config_info{num_gpu_blocks} (rank 0): label missing',
      'vllm:num_requests_waiting (rank 0): value Infinity is not a count',
    ]);
  });

  it('puts block counts and sizes to the range check, named without the rank, and leaves a refused one out with a reason', () => {
    const asked: unknown[] = [];
    const accept = (fact: string, field: string, value: number): number | undefined => {
      asked.push([fact, field, value]);
      return value <= 1024 ? value : undefined;
    };
    const text = [
      'vllm:kv_cache_usage_perc{engine="0"} 0.5',
      'vllm:kv_cache_usage_perc{engine="1"} 0.5',
      'vllm:cache_config_info{block_size="2147483647",num_gpu_blocks="100"} 1',
      '',
    ].join('\n');
    const r = parseEngineMetrics(text, 'vllm', accept);
    expect(r.ranks.get(1)).toEqual({ kvUsagePerc: 0.5, kvTotalBlocks: 100, kvUsedBlocks: 50 });
    expect(asked).toContainEqual(['kvBlockSize', 'vllm:cache_config_info{block_size}', 2 ** 31 - 1]);
    expect(asked).toContainEqual(['kvTotalBlocks', 'vllm:cache_config_info{num_gpu_blocks}', 100]);
    expect(r.problems).toContain('vllm:cache_config_info{block_size} (rank 1): value 2147483647 is not a usable kvBlockSize');
  });

  it('reports missing KV series but still returns rank 0 with what it has', () => {
    const r = parseEngineMetrics(fixture('vllm-missing.txt'));
    expect(r.ranks.get(0)).toEqual({ running: 5, waiting: 1 });
    expect(r.problems).toContain('vllm:kv_cache_usage_perc (rank 0): series missing');
    expect(r.problems).toContain('vllm:cache_config_info{num_gpu_blocks} (rank 0): series missing');
  });

  it('keeps the good lines of a corrupted body and explains the rest', () => {
    const r = parseEngineMetrics(fixture('vllm-garbage.txt'));
    expect(r.ranks.get(0)).toEqual({ kvUsagePerc: 0.5, kvTotalBlocks: 1000, kvUsedBlocks: 500, blockSize: 32 });
    expect(r.problems.filter((p) => p.startsWith('line '))).toHaveLength(6);
    expect(r.problems).toContain('vllm:num_requests_running (rank 0): series missing');
  });

  it('accepts CRLF line endings', () => {
    expect(parseEngineMetrics(fixture('vllm-crlf.txt')).ranks.get(0)).toEqual({
      kvUsagePerc: 0.75,
      kvTotalBlocks: 100,
      kvUsedBlocks: 75,
      blockSize: 16,
      running: 1,
      waiting: 0,
    });
  });

  it('returns no ranks and a clear problem when nothing is recognised', () => {
    const r = parseEngineMetrics('<html>502</html>\nup 1\n');
    expect(r.format).toBeUndefined();
    expect(r.ranks.size).toBe(0);
    expect(r.problems.at(-1)).toMatch(/no known engine metrics/);
  });

  it('applies an unlabelled info series to every rank and ignores non-numeric rank labels', () => {
    const text = [
      'vllm:kv_cache_usage_perc{engine="0"} 0.5',
      'vllm:kv_cache_usage_perc{engine="2"} 1',
      'vllm:kv_cache_usage_perc{engine="x"} 1',
      'vllm:cache_config_info{block_size="16",num_gpu_blocks="10"} 1',
      'vllm:num_requests_running{dp_rank="2"} 1',
    ].join('\n');
    const r = parseEngineMetrics(text, 'vllm');
    expect([...r.ranks.keys()]).toEqual([0, 2]);
    expect(r.ranks.get(2)).toMatchObject({ kvUsedBlocks: 10, kvTotalBlocks: 10, running: 1 });
    expect(r.ranks.get(0)).toMatchObject({ kvUsedBlocks: 5 });
    expect(r.problems).toContain('vllm:kv_cache_usage_perc: dp rank label "x" is not a rank number; series ignored');
  });

  it('rejects a ratio above 1 rather than publishing nonsense', () => {
    const r = parseEngineMetrics('trtllm_kv_cache_utilization 1.5\ntrtllm_kv_cache_max_blocks 10\ntrtllm_kv_cache_tokens_per_block 32');
    expect(r.ranks.get(0)).toEqual({ kvTotalBlocks: 10, blockSize: 32 });
    expect(r.problems).toEqual(['trtllm_kv_cache_utilization (rank 0): value 1.5 is not a ratio in 0..1']);
  });
});
