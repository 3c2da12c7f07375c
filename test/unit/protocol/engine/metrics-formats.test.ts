/**
 * The engine metrics formats --engine-metrics-format accepts: 'auto' plus each engine once, and
 * every engine named is one the metrics reader can read, so the config never accepts a format
 * the reader would fail on.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ENGINE_METRICS_FORMATS, type EngineMetricsFormat } from '../../../../src/protocol/engine/metrics-formats.js';
import { SIDECAR_OPTIONS } from '../../../../src/sidecar/config/options.js';
import { parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { parseEngineMetrics } from '../../../../src/sidecar/load/engine-metrics-reader.js';
import { problems } from '../../../support/config-problems.js';

const fixture = (format: EngineMetricsFormat): string => readFileSync(new URL(`../../../fixtures/engine-metrics/${format}.txt`, import.meta.url), 'utf8');
const engines = ENGINE_METRICS_FORMATS.filter((f): f is EngineMetricsFormat => f !== 'auto');

describe('ENGINE_METRICS_FORMATS', () => {
  it("is 'auto' and the four engines, each once", () => {
    expect([...ENGINE_METRICS_FORMATS].sort()).toEqual(['auto', 'sglang', 'trtllm-serve', 'trtllm-triton', 'vllm']);
    expect(new Set(ENGINE_METRICS_FORMATS).size).toBe(ENGINE_METRICS_FORMATS.length);
  });

  it('holds the option default, and --help names every format', () => {
    expect(ENGINE_METRICS_FORMATS).toContain(SIDECAR_OPTIONS.engineMetricsFormat.default);
    for (const format of ENGINE_METRICS_FORMATS) expect(SIDECAR_OPTIONS.engineMetricsFormat.help).toContain(format);
  });

  it.each(engines)('names %s, a format the metrics reader reads when asked for it and detects by itself', (format) => {
    const text = fixture(format);
    const forced = parseEngineMetrics(text, format);
    expect(forced.format).toBe(format);
    expect(forced.ranks.size).toBeGreaterThan(0);
    expect(parseEngineMetrics(text, 'auto').format).toBe(format);
  });

  it('is what the sidecar config accepts, and it names them all when refusing another', () => {
    for (const format of ENGINE_METRICS_FORMATS) {
      expect(parseSidecarConfig({ engineMetricsFormat: format }, {}).load.engineMetricsFormat).toBe(format);
    }
    expect(problems({ engineMetricsFormat: 'tgi' })).toEqual([`--engine-metrics-format must be one of ${ENGINE_METRICS_FORMATS.join(', ')}, got "tgi"`]);
  });
});
