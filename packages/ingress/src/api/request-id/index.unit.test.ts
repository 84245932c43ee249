import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { Env } from '../context.ts';
import { correlated } from './index.ts';

function app() {
  const hono = new Hono<Env>();
  hono.use(correlated());
  hono.get('/', (c) => c.text(c.get('requestId')));
  return hono;
}

describe('x-request-id', () => {
  it('echoes a valid x-request-id and makes one when absent', async () => {
    const given = await app().request('/', { headers: { 'x-request-id': 'corr-7' } });
    expect(given.headers.get('x-request-id')).toBe('corr-7');
    expect(await given.text()).toBe('corr-7'); // what the log lines carry
    const made = await app().request('/');
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    // Not a usable id (hono/request-id's checks): replaced by a fresh one.
    for (const bad of ['has space', 'a;b', 'x'.repeat(256)]) {
      const replaced = await app().request('/', { headers: { 'x-request-id': bad } });
      expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
    const longest = await app().request('/', { headers: { 'x-request-id': 'x'.repeat(255) } });
    expect(longest.headers.get('x-request-id')).toBe('x'.repeat(255));
  });
});
