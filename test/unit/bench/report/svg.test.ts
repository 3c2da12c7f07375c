// The benchmark's bar charts: well-formed SVG, bars to scale from zero, gaps for missing values,
// and every label escaped.
import { describe, expect, it } from 'vitest';
import { barChartSvg, lineChartSvg } from '../../../../bench/report/svg.js';

const heights = (svg: string): number[] =>
  [...svg.matchAll(/<rect x="[^"]+" y="[^"]+" width="[^"]+" height="([^"]+)" fill="[^"]+"><title>/g)].map((m) => Number(m[1]));

describe('barChartSvg', () => {
  it('draws one bar per finite value, heights proportional to the values', () => {
    const svg = barChartSvg({
      title: 't',
      yLabel: 'ms',
      series: ['a', 'b'],
      groups: [
        { label: 'r1', values: [10, 20] },
        { label: 'r2', values: [5, NaN] },
      ],
    });
    const bars = heights(svg);
    expect(bars).toHaveLength(3);
    expect(bars[1]! / bars[0]!).toBeCloseTo(2, 1);
    expect(bars[2]! / bars[0]!).toBeCloseTo(0.5, 1);
  });

  it('puts the axis top at a round number at or above the largest value', () => {
    const svg = barChartSvg({ title: 't', yLabel: 'ms', series: ['a'], groups: [{ label: 'r', values: [7.3] }] });
    const ticks = [...svg.matchAll(/text-anchor="end">([^<]+)</g)].map((m) => Number(m[1]));
    expect(ticks[0]).toBe(0);
    expect(ticks.at(-1)).toBeGreaterThanOrEqual(7.3);
    expect(ticks.at(-1)).toBeLessThanOrEqual(10);
  });

  it('escapes every text that came from outside', () => {
    const svg = barChartSvg({ title: '<script>x</script>', yLabel: 'a&b', series: ['"s"'], groups: [{ label: "<g'>", values: [1] }] });
    expect(svg).not.toContain('<script>');
    expect(svg).not.toContain('a&b');
    expect(svg).toContain('&#60;script&#62;');
    expect(svg).not.toMatch(/<g'>/);
  });

  it('draws an empty chart without dividing by zero', () => {
    const svg = barChartSvg({ title: 't', yLabel: 'ms', series: ['a'], groups: [] });
    expect(svg).not.toContain('NaN');
    expect(svg).not.toContain('Infinity');
  });
});

describe('lineChartSvg', () => {
  const points = (svg: string): [number, number][] => [...svg.matchAll(/<circle cx="([^"]+)" cy="([^"]+)"/g)].map((m) => [Number(m[1]), Number(m[2])]);

  it('draws one marker per finite point, higher values higher, and breaks the line at a gap', () => {
    const svg = lineChartSvg({
      title: 't',
      xLabel: 'x',
      yLabel: 'y',
      series: [
        {
          name: 'a',
          points: [
            [1, 10],
            [2, NaN],
            [4, 20],
            [8, 5],
          ],
        },
      ],
      logX: true,
    });
    const marks = points(svg);
    expect(marks).toHaveLength(3);
    expect(marks[1]![1]).toBeLessThan(marks[0]![1]); // 20 sits above 10 (smaller y on screen)
    expect(marks[2]![1]).toBeGreaterThan(marks[0]![1]);
    expect(svg.match(/<polyline/g)).toHaveLength(1); // [1] alone, then [4, 8]
  });

  it('spaces a log2 axis evenly by doublings', () => {
    const svg = lineChartSvg({
      title: 't',
      xLabel: 'x',
      yLabel: 'y',
      series: [
        {
          name: 'a',
          points: [
            [1, 1],
            [2, 1],
            [4, 1],
          ],
        },
      ],
      logX: true,
    });
    const [a, b, c] = points(svg).map(([x]) => x);
    expect(b! - a!).toBeCloseTo(c! - b!, 6);
  });

  it('keeps every legend entry inside the chart: 200 px apart for a few series, closer for more', () => {
    const legendX = (n: number): number[] => {
      const series = Array.from({ length: n }, (_, i) => ({ name: `s${i}`, points: [[1, i]] as const }));
      return [...lineChartSvg({ title: 't', xLabel: 'x', yLabel: 'y', series }).matchAll(/<rect x="(\d+)" y="346"/g)].map((m) => Number(m[1]));
    };
    expect(legendX(3)).toEqual([64, 264, 464]);
    const six = legendX(6);
    expect(six).toHaveLength(6);
    expect(six.at(-1)! + 100).toBeLessThanOrEqual(720);
  });

  it('escapes series names', () => {
    expect(lineChartSvg({ title: 't', xLabel: 'x', yLabel: 'y', series: [{ name: '<b>', points: [[1, 1]] }] })).not.toContain('<b>');
  });
});
