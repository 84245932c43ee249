// A line plot written as a PNG with nothing but node:zlib: panels stacked vertically, one per
// metric, each series a colored polyline over a shared time axis, with light grid lines. No text
// is drawn (no font at hand): BENCHMARKS.md gives each panel's title, scale and colors.
import { writeFileSync } from 'node:fs';
import { crc32, deflateSync } from 'node:zlib';

export interface Series {
  /** [x, y] points, x shared by every panel. */
  points: Array<[number, number]>;
  color: [number, number, number];
}

export interface Panel {
  series: Series[];
  /** Top of the y axis (default: the largest y). */
  yMax?: number;
}

const W = 900;
const PANEL_H = 180;
const PAD = 12;

export function writePlot(path: string, panels: Panel[], xMax: number): void {
  const h = panels.length * (PANEL_H + PAD) + PAD;
  const pixels = Buffer.alloc(W * h * 3, 255);
  const set = (x: number, y: number, [r, g, b]: [number, number, number]) => {
    if (x < 0 || y < 0 || x >= W || y >= h) return;
    const i = (Math.round(y) * W + Math.round(x)) * 3;
    pixels[i] = r;
    pixels[i + 1] = g;
    pixels[i + 2] = b;
  };
  panels.forEach((panel, p) => {
    const top = PAD + p * (PANEL_H + PAD);
    const yMax = panel.yMax ?? Math.max(1e-9, ...panel.series.flatMap((s) => s.points.map(([, y]) => y)));
    // Frame and a grid: 4 horizontal lines (quarters of yMax), one vertical per tenth of xMax.
    for (let q = 0; q <= 4; q++)
      for (let x = PAD; x < W - PAD; x++)
        set(x, top + (PANEL_H * q) / 4, q % 4 === 0 ? [0, 0, 0] : [220, 220, 220]);
    for (let t = 0; t <= 10; t++)
      for (let y = top; y <= top + PANEL_H; y++) set(PAD + ((W - 2 * PAD) * t) / 10, y, [220, 220, 220]);
    const toX = (x: number) => PAD + ((W - 2 * PAD) * x) / xMax;
    const toY = (y: number) => top + PANEL_H - (PANEL_H * Math.min(y, yMax)) / yMax;
    for (const series of panel.series) {
      for (let i = 1; i < series.points.length; i++) {
        const [x0, y0] = series.points[i - 1] ?? [0, 0];
        const [x1, y1] = series.points[i] ?? [0, 0];
        const steps = Math.max(Math.abs(toX(x1) - toX(x0)), Math.abs(toY(y1) - toY(y0)), 1);
        for (let s = 0; s <= steps; s++) {
          const x = toX(x0 + ((x1 - x0) * s) / steps);
          const y = toY(y0 + ((y1 - y0) * s) / steps);
          set(x, y, series.color);
          set(x, y + 1, series.color); // 2 px thick
        }
      }
    }
  });
  writeFileSync(path, png(W, h, pixels));
}

function png(width: number, height: number, rgb: Buffer): Buffer {
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) rgb.copy(raw, y * (width * 3 + 1) + 1, y * width * 3, (y + 1) * width * 3);
  const chunk = (type: string, data: Buffer) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'ascii');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
    return Buffer.concat([head, data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // truecolor RGB
  const signature = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([
    signature,
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
