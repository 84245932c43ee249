import { describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import { formatRfc3339, parseRfc3339, RFC3339_PATTERN, tryParseRfc3339 } from './rfc3339.ts';

describe('tryParseRfc3339', () => {
  it.each([
    ['2026-12-01T09:00:00Z', Date.UTC(2026, 11, 1, 9)],
    ['2026-12-01t09:00:00z', Date.UTC(2026, 11, 1, 9)],
    ['2026-12-01T11:00:00+02:00', Date.UTC(2026, 11, 1, 9)],
    ['2026-12-01T04:30:00-04:30', Date.UTC(2026, 11, 1, 9)],
    ['2026-12-01T09:00:00.5Z', Date.UTC(2026, 11, 1, 9, 0, 0, 500)],
    ['2026-12-01T09:00:00.123456789Z', Date.UTC(2026, 11, 1, 9, 0, 0, 123)],
    ['2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
    ['2000-02-29T00:00:00Z', Date.UTC(2000, 1, 29)],
    ['0001-01-01T00:00:00Z', -62135596800000],
    ['1969-12-31T23:59:59Z', -1000],
  ])('accepts %s', (text, epochMs) => {
    expect(tryParseRfc3339(text)).toEqual({ ok: true, epochMs });
  });

  it.each([
    ['', /expected/],
    ['2026-12-01', /expected/],
    ['2026-12-01T09:00:00', /expected/], // no offset: ambiguous instant
    ['2026-12-01T09:00Z', /expected/], // seconds are mandatory
    ['2026-12-01 09:00:00Z', /expected/],
    ['2026-12-01T09:00:00+0200', /expected/],
    ['2026-12-01T09:00:00.Z', /expected/],
    [' 2026-12-01T09:00:00Z', /expected/],
    ['tomorrow', /expected/],
    ['2026-13-01T09:00:00Z', /month 13/],
    ['2026-00-01T09:00:00Z', /month 0/],
    ['2026-02-29T09:00:00Z', /day 29/],
    ['1900-02-29T09:00:00Z', /day 29/],
    ['2026-04-31T09:00:00Z', /day 31/],
    ['2026-04-00T09:00:00Z', /day 0/],
    ['2026-12-01T24:00:00Z', /hour 24/],
    ['2026-12-01T09:60:00Z', /minute 60/],
    ['2026-12-31T23:59:60Z', /second 60/],
    ['2026-12-01T09:00:00+24:00', /offset/],
    ['2026-12-01T09:00:00+02:60', /offset/],
  ])('refuses %j', (text, reason) => {
    const parsed = tryParseRfc3339(text);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.message).toContain(`invalid RFC 3339 time ${JSON.stringify(text)}`);
    expect(parsed.message).toMatch(reason);
  });

  it('has a JSON Schema pattern matching the syntax', () => {
    const pattern = new RegExp(RFC3339_PATTERN);
    expect(pattern.test('2026-12-01T11:00:00.25+02:00')).toBe(true);
    expect(pattern.test('2026-12-01T09:00:00')).toBe(false);
  });
});

describe('parseRfc3339 and formatRfc3339', () => {
  it('round-trip through epoch milliseconds', () => {
    const epochMs = parseRfc3339('2026-12-01T11:00:00.250+02:00');
    expect(formatRfc3339(epochMs)).toBe('2026-12-01T09:00:00.250Z');
  });

  it('throws a ValidationError naming the input', () => {
    expect(() => parseRfc3339('2026-02-30T00:00:00Z')).toThrow(ValidationError);
    expect(() => parseRfc3339('2026-02-30T00:00:00Z')).toThrow(/"2026-02-30T00:00:00Z"/);
  });
});
