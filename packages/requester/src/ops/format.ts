/**
 * How the admin faces write times and sizes: ISO text for JSON (the CLI's `--json`, the admin
 * API), and short human text for people (the CLI's tables, the operator UI).
 */

/** An ISO timestamp for JSON output (null when absent). */
export function isoTime(epochMs: number | null | undefined): string | null {
  return epochMs === null || epochMs === undefined ? null : new Date(epochMs).toISOString();
}

const UNITS: ReadonlyArray<[string, number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
];

/** A span for people, two units at most: `3m`, `2h5m`, `1d3h`, `450ms`. */
export function humanSpan(ms: number): string {
  const abs = Math.abs(ms);
  const first = UNITS.findIndex(([, size]) => abs >= size);
  if (first < 0) return `${Math.round(abs)}ms`;
  const [unit, size] = UNITS[first] as [string, number];
  const whole = Math.floor(abs / size);
  const next = UNITS[first + 1];
  const part = next ? Math.floor((abs - whole * size) / next[1]) : 0;
  return `${whole}${unit}${next && part > 0 ? `${part}${next[0]}` : ''}`;
}

/** An instant relative to now: `3m ago`, `in 2h`, `now`; `-` when absent. */
export function humanTime(epochMs: number | null | undefined, nowMs = Date.now()): string {
  if (epochMs === null || epochMs === undefined) return '-';
  const delta = epochMs - nowMs;
  if (Math.abs(delta) < 1_000) return 'now';
  return delta < 0 ? `${humanSpan(-delta)} ago` : `in ${humanSpan(delta)}`;
}

/** Bytes for people: `512 B`, `1.5 KiB`, `3.2 MiB`. */
export function humanSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
