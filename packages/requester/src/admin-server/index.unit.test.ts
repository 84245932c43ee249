import { freePort } from '@requester/shared/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { startAdminServer } from './index.ts';

/**
 * The admin port with probes whose answer the test sets: `requester_ready` in /metrics follows
 * what /readyz says, at every scrape (Prometheus scrapes a pod whatever its readiness, so the
 * RequesterNotReady alert reads it there).
 */
describe('the admin port', () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => close?.());

  it('exports requester_ready: 1 while /readyz answers 200, 0 while it answers 503', async () => {
    let ready = true;
    const server = await startAdminServer('127.0.0.1', await freePort(), {
      live: () => true,
      ready: async () => ({ ready, checks: { redis: ready } }),
    });
    close = () => new Promise((resolve) => server.close(() => resolve()));
    const url = `http://127.0.0.1:${server.port}`;
    const readyValue = async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      return /^requester_ready (\S+)$/m.exec(text)?.[1];
    };

    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(await readyValue()).toBe('1');
    ready = false;
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    expect(await readyValue()).toBe('0');
    ready = true;
    expect(await readyValue()).toBe('1');
  });
});
