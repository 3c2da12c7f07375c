// The Prometheus text parser: samples with labels and timestamps, Go's float spellings, and bad lines skipped and reported.
import { describe, expect, it } from 'vitest';
import { MAX_PROBLEMS, parsePrometheusText, parseSampleValue } from '../../../../src/sidecar/load/prometheus-text.js';

describe('parseSampleValue', () => {
  it.each([
    ['1', 1],
    ['-2.5', -2.5],
    ['+3', 3],
    ['1e3', 1000],
    ['1.5E-2', 0.015],
    ['.5', 0.5],
    ['7.', 7],
    ['+Inf', Infinity],
    ['-Inf', -Infinity],
    ['inf', Infinity],
    ['Infinity', Infinity],
    ['-infinity', -Infinity],
  ])('reads %s as %d', (token, value) => {
    expect(parseSampleValue(token)).toBe(value);
  });

  it('reads NaN in any case and sign', () => {
    for (const token of ['NaN', 'nan', '-NaN', '+nan']) expect(parseSampleValue(token)).toBeNaN();
  });

  it.each(['', '1,5', '0x10', '1e', 'e5', '--1', 'Inf1', 'null', '1_000'])('refuses %j', (token) => {
    expect(parseSampleValue(token)).toBeUndefined();
  });
});

describe('parsePrometheusText', () => {
  it('reads samples with and without labels, skipping comments, HELP/TYPE and blank lines', () => {
    const text = ['# HELP x help', '# TYPE x gauge', 'x 1', '', '   ', 'y{a="1",b="two"} 2.5', 'z_total{} 3'].join('\n');
    expect(parsePrometheusText(text)).toEqual({
      samples: [
        { name: 'x', labels: {}, value: 1 },
        { name: 'y', labels: { a: '1', b: 'two' }, value: 2.5 },
        { name: 'z_total', labels: {}, value: 3 },
      ],
      problems: [],
    });
  });

  it('accepts colons in names, spaces around labels, a trailing comma and CRLF line ends', () => {
    const { samples, problems } = parsePrometheusText('vllm:num_requests_running { model_name = "m" , } 4\r\nb 5\r\n');
    expect(problems).toEqual([]);
    expect(samples).toEqual([
      { name: 'vllm:num_requests_running', labels: { model_name: 'm' }, value: 4 },
      { name: 'b', labels: {}, value: 5 },
    ]);
  });

  it('unescapes backslash, quote and newline in label values, and keeps commas and braces inside them', () => {
    const { samples } = parsePrometheusText('m{path="a\\\\b",q="say \\"hi\\"",n="l1\\nl2",odd="{x,y}"} 1');
    expect(samples[0]!.labels).toEqual({ path: 'a\\b', q: 'say "hi"', n: 'l1\nl2', odd: '{x,y}' });
  });

  it('reads an optional integer timestamp in ms', () => {
    expect(parsePrometheusText('m 1 1700000000000\nn 2 -5').samples).toEqual([
      { name: 'm', labels: {}, value: 1, timestampMs: 1_700_000_000_000 },
      { name: 'n', labels: {}, value: 2, timestampMs: -5 },
    ]);
  });

  it('keeps NaN and infinite values for the caller to judge', () => {
    const [nan, inf] = parsePrometheusText('a NaN\nb +Inf').samples;
    expect(nan!.value).toBeNaN();
    expect(inf!.value).toBe(Infinity);
  });

  it.each([
    ['1abc 2', 'line 1: metric name expected'],
    ['m', 'line 1: no value for m'],
    ['m{a="1"}', 'line 1: no value for m'],
    ['m 1 2 3', 'line 1: unexpected text after value of m'],
    ['m one', 'line 1: bad value "one" for m'],
    ['m 1 1.5', 'line 1: bad timestamp for m'],
    ['m{1a="x"} 1', 'line 1: label name expected'],
    ['m{a} 1', "line 1: '=' expected after label a"],
    ['m{a=x} 1', 'line 1: quoted value expected for label a'],
    ['m{a="x} 1', 'line 1: unterminated value for label a'],
    ['m{a="\\t"} 1', 'line 1: bad escape in label a'],
    ['m{a="1",a="2"} 1', 'line 1: duplicate label a'],
    ['m{a="1" b="2"} 1', "line 1: ',' or '}' expected after label a"],
    ['m{a="1"', "line 1: ',' or '}' expected after label a"],
    ['m{a="1",', 'line 1: label name expected'],
  ])('skips %j and reports %j', (line, problem) => {
    expect(parsePrometheusText(line)).toEqual({ samples: [], problems: [problem] });
  });

  it('keeps the good lines around a bad one, numbering lines from 1 including comments', () => {
    const { samples, problems } = parsePrometheusText('# c\ngood 1\nbad{ 2\nalso_good 3');
    expect(samples.map((s) => s.name)).toEqual(['good', 'also_good']);
    expect(problems).toEqual(['line 3: label name expected']);
  });

  it('cuts a long bad value to 40 characters in the report', () => {
    const { problems } = parsePrometheusText(`m ${'x'.repeat(100)}`);
    expect(problems[0]).toBe(`line 1: bad value ${JSON.stringify('x'.repeat(40))} for m`);
  });

  it(`lists at most ${MAX_PROBLEMS} bad lines and sums up the rest in one more entry`, () => {
    const text = Array.from({ length: MAX_PROBLEMS + 5 }, () => 'bad').join('\n');
    const { problems } = parsePrometheusText(text);
    expect(problems).toHaveLength(MAX_PROBLEMS + 1);
    expect(problems[MAX_PROBLEMS - 1]).toBe(`line ${MAX_PROBLEMS}: no value for bad`);
    expect(problems[MAX_PROBLEMS]).toBe('5 more malformed lines not listed');
  });

  it('returns nothing for empty input', () => {
    expect(parsePrometheusText('')).toEqual({ samples: [], problems: [] });
  });
});
