import { afterEach, describe, expect, it } from 'vitest';
import { type CountingTarget, startCountingTarget } from './counting-target.ts';

let target: CountingTarget | undefined;
afterEach(async () => {
  await target?.close();
  target = undefined;
});

const call = async (url: string, headers: Record<string, string> = {}) => {
  const res = await fetch(url, { headers });
  return res.text();
};

describe('startCountingTarget', () => {
  it('counts the calls of each key, and the most of a key in flight at once', async () => {
    target = await startCountingTarget(20);
    const url = target.url;
    await Promise.all([call(`${url}/?key=a`), call(`${url}/?key=a`), call(`${url}/?key=b`)]);
    await call(`${url}/`);
    expect(Object.fromEntries(target.calls)).toEqual({ a: 2, b: 1, '': 1 });
    expect(target.most.get('a')).toBe(2);
    expect(target.served()).toBe(4);
  });

  it('counts by what countBy makes of the call and its key', async () => {
    target = await startCountingTarget(1, {
      countBy: (req, key) => `${key} ${req.headers['x-caller'] ?? '?'}`,
    });
    const url = target.url;
    await call(`${url}/?key=a`, { 'x-caller': 'old' });
    await call(`${url}/?key=a`, { 'x-caller': 'new' });
    await call(`${url}/?key=a`, { 'x-caller': 'new' });
    await call(`${url}/?key=b`);
    expect(Object.fromEntries(target.calls)).toEqual({ 'a old': 1, 'a new': 2, 'b ?': 1 });
  });
});
