import { describe, expect, it } from 'vitest';
import { uniqueName } from './index.ts';
import { stampOf } from './topics.ts';

describe('stampOf', () => {
  it('reads the instant uniqueName stamped, with or without a suffix after a dot', () => {
    const before = Date.now();
    const name = uniqueName('e2e');
    const stamp = stampOf(name);
    expect(stamp).toBeGreaterThanOrEqual(before);
    expect(stampOf(`${name}.in.bodies`)).toBe(stamp);
    expect(stampOf(`relay.in-${name.slice(4)}`)).toBe(stamp);
  });

  it('takes names uniqueName did not make for no stamp at all', () => {
    for (const topic of [
      'requester.in',
      'requester.out',
      'e2e-mxc87sv6-2e179b-extra',
      'a-zzzzzzzz-abcdef',
      'x-00000001-abcdef',
    ])
      expect(stampOf(topic), topic).toBeUndefined();
  });
});
