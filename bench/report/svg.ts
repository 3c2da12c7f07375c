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
