import { describe, expect, it } from 'vitest';
import { humanSize, humanSpan, humanTime } from './format.ts';

describe('human output of the admin faces (CLI tables, UI pages)', () => {
  it('writes spans with two units at most, and instants relative to now', () => {
    expect(humanSpan(450)).toBe('450ms');
    expect(humanSpan(3 * 60_000 + 5_000)).toBe('3m5s');
    expect(humanSpan(2 * 3_600_000 + 59_000)).toBe('2h');
    expect(humanSpan(26 * 3_600_000)).toBe('1d2h');
    const now = 1_000_000_000_000;
    expect(humanTime(now - 180_000, now)).toBe('3m ago');
    expect(humanTime(now + 7_200_000, now)).toBe('in 2h');
    expect(humanTime(now + 300, now)).toBe('now');
    expect(humanTime(undefined, now)).toBe('-');
  });

  it('writes sizes in binary units', () => {
    expect(humanSize(512)).toBe('512 B');
    expect(humanSize(1_536)).toBe('1.5 KiB');
    expect(humanSize(300 * 1024 * 1024)).toBe('300 MiB');
  });
});
