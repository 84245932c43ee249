import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import {
  durationToMs,
  formatDuration,
  formatDurationNs,
  GO_DURATION_PATTERN,
  MAX_DURATION_NS,
  MIN_DURATION_NS,
  msToNs,
  parseDuration,
  toMs,
  tryParseDuration,
} from './duration.ts';

const ns = 1n;
const us = 1_000n;
const ms = 1_000_000n;
const s = 1_000_000_000n;
const m = 60n * s;
const h = 60n * m;

// The table of Go's own src/time/time_test.go (parseDurationTests), plus a few of ours.
const valid: Array<[string, bigint]> = [
  ['0', 0n],
  ['5s', 5n * s],
  ['30s', 30n * s],
  ['1478s', 1478n * s],
  ['-5s', -5n * s],
  ['+5s', 5n * s],
  ['-0', 0n],
  ['+0', 0n],
  ['5.0s', 5n * s],
  ['5.6s', 5n * s + 600n * ms],
  ['5.s', 5n * s],
  ['.5s', 500n * ms],
  ['1.0s', 1n * s],
  ['1.00s', 1n * s],
  ['1.004s', 1n * s + 4n * ms],
  ['1.0040s', 1n * s + 4n * ms],
  ['100.00100s', 100n * s + 1n * ms],
  ['10ns', 10n * ns],
  ['11us', 11n * us],
  ['12\u00b5s', 12n * us],
  ['12\u03bcs', 12n * us],
  ['13ms', 13n * ms],
  ['14s', 14n * s],
  ['15m', 15n * m],
  ['16h', 16n * h],
  ['3h30m', 3n * h + 30n * m],
  ['10.5s4m', 4n * m + 10n * s + 500n * ms],
  ['-2m3.4s', -(2n * m + 3n * s + 400n * ms)],
  ['1h2m3s4ms5us6ns', 1n * h + 2n * m + 3n * s + 4n * ms + 5n * us + 6n * ns],
  ['39h9m14.425s', 39n * h + 9n * m + 14n * s + 425n * ms],
  ['52763797000ns', 52763797000n],
  ['0.3333333333333333333h', 20n * m],
  ['9007199254740993ns', (1n << 53n) + 1n],
  ['9223372036854775807ns', MAX_DURATION_NS],
  ['9223372036854775.807us', MAX_DURATION_NS],
  ['9223372036s854ms775us807ns', MAX_DURATION_NS],
  ['-9223372036854775808ns', MIN_DURATION_NS],
  ['-9223372036854775.808us', MIN_DURATION_NS],
  ['-9223372036s854ms775us808ns', MIN_DURATION_NS],
  ['-2562047h47m16.854775808s', MIN_DURATION_NS],
  ['0.100000000000000000000h', 6n * m],
  ['0.830103483285477580700h', 49n * m + 48n * s + 372539827n],
  ['1.5h', 90n * m],
  ['2h45m', 2n * h + 45n * m],
  ['300ms', 300n * ms],
  ['0s', 0n],
  ['0.0s', 0n],
  ['1h1h', 2n * h],
];

// Go's parseDurationErrorTests, with the reason we report.
const invalid: Array<[string, RegExp]> = [
  ['', /expected \[-\+\]<number><unit>/],
  ['3', /missing unit/],
  ['-', /expected/],
  ['s', /expected/],
  ['.', /expected/],
  ['-.', /expected/],
  ['.s', /expected/],
  ['+.s', /expected/],
  ['1d', /unknown unit "d"/],
  ['\x85\x85', /expected/],
  ['\xffff', /expected/],
  ['hello \xffff world', /expected/],
  ['\uFFFD', /expected/],
  ['9223372036854775810ns', /out of range/],
  ['9223372036854775808ns', /out of range/],
  ['-9223372036854775809ns', /out of range/],
  ['9223372036854776us', /out of range/],
  ['3000000h', /out of range/],
  ['9223372036854775.808us', /out of range/],
  ['9223372036854ms775us808ns', /out of range/],
  // Go's uint64 sum would wrap to 0 here; we refuse instead of returning a nonsense value.
  ['9223372036854775808ns9223372036854775808ns', /out of range/],
  ['5x', /unknown unit "x"/],
  ['1 s', /unknown unit " s"/],
  [' 1s', /expected/],
  ['1s ', /unknown unit "s "/],
  ['1S', /unknown unit "S"/],
  ['1sec', /unknown unit "sec"/],
  ['00', /missing unit/],
  ['1.5', /missing unit/],
  ['1h30', /missing unit/],
  ['--1s', /expected/],
  ['1e3s', /unknown unit "e"/],
  ['1..5s', /missing unit/],
];

describe('tryParseDuration (Go time.ParseDuration)', () => {
  it.each(valid)('accepts %j', (text, expected) => {
    expect(tryParseDuration(text)).toEqual({ ok: true, ns: expected });
  });

  it.each(invalid)('refuses %j', (text, reason) => {
    const parsed = tryParseDuration(text);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.message).toContain(`invalid Go duration ${JSON.stringify(text)}`);
    expect(parsed.message).toMatch(reason);
  });

  it('has a JSON Schema pattern that agrees with the parser on syntax', () => {
    const pattern = new RegExp(GO_DURATION_PATTERN, 'u');
    for (const [text] of valid) expect(pattern.test(text), text).toBe(true);
    for (const [text, reason] of invalid) {
      if (reason.source === 'out of range') continue; // overflow is beyond a regex
      expect(pattern.test(text), text).toBe(false);
    }
  });
});

describe('parseDuration', () => {
  it('returns nanoseconds as a bigint', () => {
    expect(parseDuration('1.5h')).toBe(5_400_000_000_000n);
  });

  it('throws a ValidationError naming the input', () => {
    expect(() => parseDuration('5x')).toThrow(ValidationError);
    expect(() => parseDuration('5x')).toThrow('invalid Go duration "5x": unknown unit "x"');
  });
});

describe('toMs and durationToMs', () => {
  it('truncate toward zero like Go Duration.Milliseconds()', () => {
    expect(toMs(1_999_999n)).toBe(1);
    expect(toMs(-1_999_999n)).toBe(-1);
    expect(durationToMs('1.5s')).toBe(1500);
    expect(durationToMs('2h45m')).toBe(9_900_000);
    expect(durationToMs('999us')).toBe(0);
  });

  it('durationToMs throws with the reason for config callers', () => {
    expect(() => durationToMs('ten seconds')).toThrow(/invalid Go duration "ten seconds"/);
  });
});

describe('msToNs', () => {
  it('rounds to whole nanoseconds', () => {
    expect(msToNs(15.23)).toBe(15_230_000);
    expect(msToNs(0.0000004)).toBe(0);
  });

  it('clamps to the largest JSON-safe integer (~104 days)', () => {
    expect(msToNs(200 * 24 * 3600 * 1000)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('refuses non-finite input', () => {
    expect(() => msToNs(Number.NaN)).toThrow(RangeError);
  });
});

describe('formatDurationNs (Go Duration.String())', () => {
  // Go's durationTests table.
  it.each([
    ['0s', 0n],
    ['1ns', 1n],
    ['1.1\u00b5s', 1100n],
    ['2.2ms', 2200n * us],
    ['3.3s', 3300n * ms],
    ['4m5s', 4n * m + 5n * s],
    ['4m5.001s', 4n * m + 5001n * ms],
    ['5h6m7.001s', 5n * h + 6n * m + 7001n * ms],
    ['8m0.000000001s', 8n * m + 1n],
    ['2562047h47m16.854775807s', MAX_DURATION_NS],
    ['-2562047h47m16.854775808s', MIN_DURATION_NS],
    ['1h0m0s', h],
    ['-1.5s', -1500n * ms],
  ])('writes %s', (text, value) => {
    expect(formatDurationNs(value)).toBe(text);
  });

  it('round-trips every int64 through parseDuration', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: MIN_DURATION_NS, max: MAX_DURATION_NS }), (value) => {
        expect(parseDuration(formatDurationNs(value))).toBe(value);
      }),
    );
  });
});

describe('formatDuration (milliseconds)', () => {
  it('writes Go-style text', () => {
    expect(formatDuration(1500)).toBe('1.5s');
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(0.25)).toBe('250\u00b5s');
    expect(formatDuration(90 * 60_000)).toBe('1h30m0s');
    expect(formatDuration(-200)).toBe('-200ms');
  });

  it('refuses non-finite input', () => {
    expect(() => formatDuration(Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });
});
