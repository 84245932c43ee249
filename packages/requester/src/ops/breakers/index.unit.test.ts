import { originOf } from '@requester/policies';
import { destinationBreakerKey } from '@requester/shared/destinations';
import { describe, expect, it } from 'vitest';
import { breakerKeyArg } from './index.ts';

describe('breakerKeyArg: what breakers show|reset name', () => {
  it("takes a destination's own breaker by its key, as breakers list shows it", () => {
    expect(breakerKeyArg('destination partner-billing', 'reset')).toBe(
      destinationBreakerKey('partner-billing'),
    );
    expect(breakerKeyArg(' destination partner-billing ', 'reset')).toBe(
      destinationBreakerKey('partner-billing'),
    );
  });

  it('takes an origin, or any URL on it', () => {
    expect(breakerKeyArg('https://api.x.com/v2/x?y=1', 'reset')).toBe(originOf('https://api.x.com'));
  });

  it('refuses anything else as a usage error', () => {
    expect(() => breakerKeyArg('partner-billing', 'reset')).toThrow(/not an origin or URL/);
    expect(() => breakerKeyArg(undefined, 'reset')).toThrow(/needs an origin/);
  });
});
