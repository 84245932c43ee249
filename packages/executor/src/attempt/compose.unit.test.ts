import { describe, expect, it } from 'vitest';
import { CHAIN } from './chain.ts';
import { compose, type Link, Passage } from './compose.ts';

class Walk extends Passage<Walk, string> {
  readonly seen: string[] = [];
}

const passing =
  (name: string): Link<Walk, string> =>
  async (walk) => {
    walk.seen.push(name);
    return `${name}(${await walk.next()})`;
  };
const ending =
  (name: string): Link<Walk, string> =>
  async (walk) => {
    walk.seen.push(name);
    return name;
  };

describe('compose', () => {
  it('runs the links in order, each wrapping what the ones after it answered', async () => {
    const chain = compose([passing('a'), passing('b'), ending('end')]);
    const walk = new Walk(chain);
    expect(await walk.next()).toBe('a(b(end))');
    expect(walk.seen).toEqual(['a', 'b', 'end']);
  });

  it('a link that does not pass on ends the walk: the links after it never run', async () => {
    const chain = compose([passing('a'), ending('stop'), ending('end')]);
    const walk = new Walk(chain);
    expect(await walk.next()).toBe('a(stop)');
    expect(walk.seen).toEqual(['a', 'stop']);
  });

  it('one chain serves walks side by side, each keeping its own place', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const waiting: Link<Walk, string> = async (walk) => {
      walk.seen.push('wait');
      await held;
      return walk.next();
    };
    const chain = compose([waiting, ending('end')]);
    const first = new Walk(chain);
    const second = new Walk(chain);
    const both = Promise.all([first.next(), second.next()]);
    release();
    expect(await both).toEqual(['end', 'end']);
    expect(first.seen).toEqual(['wait', 'end']);
    expect(second.seen).toEqual(['wait', 'end']);
  });

  it('refuses an empty chain, and a last link that passes on', async () => {
    expect(() => compose<Walk, string>([])).toThrow(/at least one link/);
    const walk = new Walk(compose([passing('a')]));
    await expect(walk.next()).rejects.toThrow(/nothing follows it/);
  });
});

describe('the chain of an attempt', () => {
  it('is cache → sign → pace → concurrency → bulkhead → limit → breaker → call', () => {
    expect(CHAIN.map((gate) => gate.name)).toEqual([
      'cache',
      'sign',
      'pace',
      'concurrency',
      'bulkhead',
      'limit',
      'breaker',
      'call',
    ]);
  });
});
