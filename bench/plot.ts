// The one way a benchmark draws a plot: panels stacked vertically over a shared x axis, each with
// a title, a y-axis label with tick values, a legend and its series (name, color, optional dash),
// drawn as SVG here and rendered to PNG by resvg (no browser, no system tool). Text uses the
// system's DejaVu Sans, so the PNG carries its own titles, units and legend.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Resvg } from '@resvg/resvg-js';

export interface Series {
  name: string;
  /** Any SVG color, e.g. '#1f77b4'. */
  color: string;
  /** An SVG stroke-dasharray, e.g. '6 4'; solid without it. */
  dash?: string;
  /** [x, y] points, x on the axis shared by every panel. */
  points: Array<[number, number]>;
}

export interface Panel {
  title: string;
  /** The y axis' label, with its unit: 'calls/s', 'latency (ms)'. */
  yLabel: string;
  series: Series[];
  /** Top of the y axis (default: the largest y, rounded up to a tick). Larger values are clipped. */
  yMax?: number;
}

export interface Plot {
  /** A line above every panel (what was run, on what machine); none without it. */
  title?: string;
  panels: Panel[];
  /** The shared x axis' label, with its unit: 'time (s)'. */
  xLabel: string;
  /** Right end of the x axis (default: the largest x, rounded up to a tick). */
  xMax?: number;
}

const WIDTH = 960;
const PANEL_H = 200;
const MARGIN = { left: 80, right: 210, top: 20 };
const TITLE_H = 34; // the plot's title line
const PANEL_GAP = 40; // room for each panel's title above its frame
const X_AXIS_H = 54; // tick values and the x label under the last panel

/** The plot as an SVG document (exported so a script can keep the vector form too). */
export function plotSvg(plot: Plot): string {
  const allX = plot.panels.flatMap((p) => p.series.flatMap((s) => s.points.map(([x]) => x)));
  const xTicks = ticks(plot.xMax ?? Math.max(0, ...allX));
  const xMax = plot.xMax ?? (xTicks.at(-1) as number);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const toX = (x: number) => MARGIN.left + (plotW * Math.min(Math.max(x, 0), xMax)) / xMax;
  const firstTop = MARGIN.top + (plot.title ? TITLE_H : 0) + PANEL_GAP;
  const height = firstTop + plot.panels.length * (PANEL_H + PANEL_GAP) - PANEL_GAP + X_AXIS_H;
  const parts = [`<rect width="${WIDTH}" height="${height}" fill="white"/>`];
  if (plot.title) parts.push(text(MARGIN.left, MARGIN.top + 16, plot.title, 'font-size="16"'));

  plot.panels.forEach((panel, i) => {
    const top = firstTop + i * (PANEL_H + PANEL_GAP);
    const bottom = top + PANEL_H;
    const allY = panel.series.flatMap((s) => s.points.map(([, y]) => y));
    const yTicks = ticks(panel.yMax ?? Math.max(0, ...allY));
    const yMax = panel.yMax ?? (yTicks.at(-1) as number);
    const toY = (y: number) => bottom - (PANEL_H * Math.min(Math.max(y, 0), yMax)) / yMax;
    parts.push(text(MARGIN.left, top - 10, panel.title, 'font-size="14" font-weight="bold"'));
    for (const y of yTicks.filter((t) => t <= yMax)) {
      parts.push(
        line(MARGIN.left, toY(y), MARGIN.left + plotW, toY(y), 'stroke="#ddd"'),
        text(MARGIN.left - 6, toY(y) + 4, formatTick(y), 'font-size="11" text-anchor="end"'),
      );
    }
    for (const x of xTicks.filter((t) => t <= xMax))
      parts.push(line(toX(x), top, toX(x), bottom, 'stroke="#eee"'));
    parts.push(
      `<rect x="${MARGIN.left}" y="${top}" width="${plotW}" height="${PANEL_H}" fill="none" stroke="#333"/>`,
      text(
        0,
        0,
        panel.yLabel,
        `font-size="12" text-anchor="middle" transform="translate(${MARGIN.left - 52} ${top + PANEL_H / 2}) rotate(-90)"`,
      ),
    );
    panel.series.forEach((series, s) => {
      const dash = series.dash ? ` stroke-dasharray="${series.dash}"` : '';
      const stroke = `stroke="${series.color}" stroke-width="2"${dash}`;
      const points = series.points.map(([x, y]) => `${toX(x).toFixed(1)},${toY(y).toFixed(1)}`).join(' ');
      parts.push(`<polyline fill="none" ${stroke} points="${points}"/>`);
      const [lx, ly] = [MARGIN.left + plotW + 14, top + 12 + 20 * s];
      parts.push(line(lx, ly, lx + 30, ly, stroke), text(lx + 37, ly + 4, series.name, 'font-size="12"'));
    });
  });

  const axisTop = firstTop + plot.panels.length * (PANEL_H + PANEL_GAP) - PANEL_GAP;
  for (const x of xTicks.filter((t) => t <= xMax))
    parts.push(text(toX(x), axisTop + 16, formatTick(x), 'font-size="11" text-anchor="middle"'));
  parts.push(text(MARGIN.left + plotW / 2, axisTop + 40, plot.xLabel, 'font-size="12" text-anchor="middle"'));
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" ` +
    `font-family="DejaVu Sans, sans-serif">${parts.join('')}</svg>`
  );
}

/** Renders the plot to a PNG file (its folder created if missing). */
export function writePlot(file: string, plot: Plot): void {
  const png = new Resvg(plotSvg(plot), { font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' } })
    .render()
    .asPng();
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  writeFileSync(file, png);
}

/** Tick values from 0 to at least `max`, about five, on a 1/2/5 × 10^n step. */
function ticks(max: number): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / 5;
  const unit = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 5, 10].find((m) => m * unit >= raw) as number) * unit;
  const out: number[] = [];
  for (let i = 0; out.at(-1) === undefined || (out.at(-1) as number) < max - step * 1e-9; i++)
    out.push(i * step);
  return out;
}

/** A tick value without float noise (0.30000000000000004 → 0.3). */
function formatTick(value: number): string {
  return String(Number(value.toPrecision(6)));
}

function line(x1: number, y1: number, x2: number, y2: number, attrs: string): string {
  return `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${attrs}/>`;
}

function text(x: number, y: number, content: string, attrs: string): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escapeXml(content)}</text>`;
}

function escapeXml(value: string): string {
  return value
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}
