/**
 * Plots as standalone SVG files, written by hand because they are small: grouped bars (one group
 * per round or setting, one bar per series) with a value axis from zero. Every text is escaped.
 */
import { writeFileSync } from 'node:fs';

export interface BarGroup {
  readonly label: string;
  /** One value per series, in the order of `series`; NaN draws no bar. */
  readonly values: readonly number[];
}

export interface BarChart {
  readonly title: string;
  readonly yLabel: string;
  readonly series: readonly string[];
  readonly groups: readonly BarGroup[];
}

const COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948'];
const W = 720;
const H = 360;
const M = { left: 64, right: 16, top: 40, bottom: 56 };

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A round number at or above `max`, and its tick step (1, 2 or 5 times a power of ten). */
function niceScale(max: number): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 0.25 };
  const raw = max / 4;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  return { top: Math.ceil(max / step) * step, step };
}

export function barChartSvg(chart: BarChart): string {
  const finite = chart.groups.flatMap((g) => g.values).filter(Number.isFinite);
  const { top, step } = niceScale(Math.max(0, ...finite));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const y = (v: number): number => M.top + plotH - (v / top) * plotH;
  const groupW = plotW / Math.max(1, chart.groups.length);
  const barW = (groupW * 0.8) / Math.max(1, chart.series.length);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${escapeXml(chart.title)}</text>`,
    `<text transform="translate(16 ${M.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(chart.yLabel)}</text>`,
  ];
  for (let v = 0; v <= top + step / 2; v += step) {
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${M.left - 6}" y="${y(v) + 4}" text-anchor="end">${Number(v.toPrecision(6))}</text>`);
  }
  chart.groups.forEach((group, g) => {
    const x0 = M.left + g * groupW + groupW * 0.1;
    group.values.forEach((value, s) => {
      if (!Number.isFinite(value)) return;
      const x = x0 + s * barW;
      out.push(
        `<rect x="${x.toFixed(1)}" y="${y(value).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y(0) - y(value)).toFixed(1)}" fill="${COLOURS[s % COLOURS.length]}"><title>${escapeXml(`${group.label}, ${chart.series[s] ?? ''}: ${value}`)}</title></rect>`,
      );
    });
    out.push(`<text x="${(x0 + groupW * 0.4).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${escapeXml(group.label)}</text>`);
  });
  chart.series.forEach((name, s) => {
    const x = M.left + s * 160;
    out.push(`<rect x="${x}" y="${H - 22}" width="12" height="12" fill="${COLOURS[s % COLOURS.length]}"/>`);
    out.push(`<text x="${x + 16}" y="${H - 12}">${escapeXml(name)}</text>`);
  });
  out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>`, '</svg>');
  return `${out.join('\n')}\n`;
}

export function writeBarChart(path: string, chart: BarChart): void {
  writeFileSync(path, barChartSvg(chart));
}

export interface LineSeries {
  readonly name: string;
  /** [x, y] in order of x; NaN y leaves a gap. */
  readonly points: readonly (readonly [number, number])[];
}

export interface LineChart {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly LineSeries[];
  /** A log2 x axis (offered load as multiples of capacity: 0.25 .. 8). */
  readonly logX?: boolean;
}

/** Lines with a point marker at each value, the y axis from zero, one colour per series. */
export function lineChartSvg(chart: LineChart): string {
  const all = chart.series.flatMap((s) => s.points).filter(([, y]) => Number.isFinite(y));
  const fx = (x: number): number => (chart.logX ? Math.log2(x) : x);
  const xs = all.map(([x]) => fx(x));
  const xMin = xs.length ? Math.min(...xs) : 0;
  const xMax = xs.length ? Math.max(...xs) : 1;
  const { top, step } = niceScale(Math.max(0, ...all.map(([, y]) => y)));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const px = (x: number): number => M.left + (xMax === xMin ? plotW / 2 : ((fx(x) - xMin) / (xMax - xMin)) * plotW);
  const py = (y: number): number => M.top + plotH - (y / top) * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${escapeXml(chart.title)}</text>`,
    `<text transform="translate(16 ${M.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(chart.yLabel)}</text>`,
    `<text x="${M.left + plotW / 2}" y="${H - 26}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`,
  ];
  for (let v = 0; v <= top + step / 2; v += step) {
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${py(v)}" y2="${py(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${M.left - 6}" y="${py(v) + 4}" text-anchor="end">${Number(v.toPrecision(6))}</text>`);
  }
  for (const x of [...new Set(all.map(([x]) => x))].sort((a, b) => a - b)) {
    out.push(`<text x="${px(x).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${Number(x.toPrecision(4))}</text>`);
  }
  // 200 px a legend entry, closer when more series would run past the right edge.
  const legendStep = Math.min(200, Math.floor((W - M.left) / Math.max(1, chart.series.length)));
  chart.series.forEach((series, s) => {
    const colour = COLOURS[s % COLOURS.length]!;
    const segments: string[][] = [[]];
    for (const [x, y] of series.points) {
      if (!Number.isFinite(y)) segments.push([]);
      else segments.at(-1)!.push(`${px(x).toFixed(1)},${py(y).toFixed(1)}`);
    }
    for (const segment of segments)
      if (segment.length > 1) out.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${segment.join(' ')}"/>`);
    for (const [x, y] of series.points) {
      if (Number.isFinite(y))
        out.push(
          `<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${colour}"><title>${escapeXml(`${series.name}: ${x} -> ${y}`)}</title></circle>`,
        );
    }
    const lx = M.left + s * legendStep;
    out.push(`<rect x="${lx}" y="${H - 14}" width="12" height="12" fill="${colour}"/>`, `<text x="${lx + 16}" y="${H - 4}">${escapeXml(series.name)}</text>`);
  });
  out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${py(0)}" y2="${py(0)}" stroke="#333"/>`, '</svg>');
  return `${out.join('\n')}\n`;
}
