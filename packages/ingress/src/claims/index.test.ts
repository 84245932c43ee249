import { parseRequestEnvelope } from '@requester/shared/contract';
import { createRedis } from '@requester/shared/redis';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { redisRequestIds, requestFingerprint } from './index.ts';

const envelope = (input: unknown) => parseRequestEnvelope(input);

describe('requestFingerprint', () => {
  const base = { request: { uri: 'https://x.test/a', method: 'POST', body: 'b' }, meta: { requestId: 'r' } };

  it('is the same for the same request, however written and whatever the service sets', () => {
    const same = [
      {
        meta: { requestId: 'r', sync: true },
        request: { body: 'b', uri: 'https://x.test/a', method: 'POST' },
      },
      {
        ...base,
        meta: { ...base.meta, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      },
      { ...base, createdAt: '2000-01-01T00:00:00Z', tryCount: 3, retryBase: 3 },
    ];
    for (const input of same)
      expect(requestFingerprint(envelope(input))).toBe(requestFingerprint(envelope(base)));
  });

  it('differs when anything the request asks for differs', () => {
    const others = [
      { ...base, request: { ...base.request, body: 'c' } },
      { ...base, meta: { ...base.meta, proxyData: { a: 1 } } },
      { ...base, meta: { ...base.meta, partition: 'p' } },
    ];
    for (const input of others)
      expect(requestFingerprint(envelope(input))).not.toBe(requestFingerprint(envelope(base)));
  });

  it('keeps its value from one version to the next (instances of two versions share the claims)', () => {
    const input = {
      request: { uri: 'https://x.test/a', method: 'POST', body: 'b', headers: { 'X-B': '2', 'x-a': '1' } },
      meta: { requestId: 'r', proxyData: { z: [1, { b: 2, a: null }], y: 'é' } },
    };
    expect(requestFingerprint(envelope(input))).toBe('mmJIuUGmjlKOifxM03J4LYWzeULf_hz0rcbXimlEEJg');
  });
});

describe('redisRequestIds', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  afterAll(() => redis.quit());

  it('claims an id once per window: new, then same for the same fingerprint, conflict for another', async () => {
    const claim = redisRequestIds(redis, `${uniqueName('rid')}:`, 60_000);
    expect(await claim('probe-a', 'r-1', 'fp-a')).toBe('new');
    expect(await claim('probe-a', 'r-1', 'fp-a')).toBe('same');
    expect(await claim('probe-a', 'r-1', 'fp-b')).toBe('conflict');
    expect(await claim('probe-a', 'r-2', 'fp-b')).toBe('new');
  });

  it("claims a requestId per client: another client's same id is new to it, and stays the first's", async () => {
    const prefix = `${uniqueName('rid')}:`;
    const claim = redisRequestIds(redis, prefix, 60_000);
    expect(await claim('probe-a', 'rid-24431', 'fp-a')).toBe('new');
    expect(await claim('probe-b', 'rid-24431', 'fp-b')).toBe('new');
    expect(await claim(undefined, 'rid-24431', 'fp-c')).toBe('new');
    expect(await claim('probe-a', 'rid-24431', 'fp-b')).toBe('conflict');
    expect(await claim('probe-b', 'rid-24431', 'fp-b')).toBe('same');
    // Without a client, the key is the one earlier versions wrote: their claims still hold.
    expect(await redis.get(`${prefix}rid:rid-24431`)).toBe('fp-c');
  });

  it('forgets an id after the window; a window of 0 checks nothing', async () => {
    const prefix = `${uniqueName('rid')}:`;
    const claim = redisRequestIds(redis, prefix, 50);
    expect(await claim(undefined, 'r-1', 'fp-a')).toBe('new');
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await claim(undefined, 'r-1', 'fp-b')).toBe('new');
    const off = redisRequestIds(redis, prefix, 0);
    expect(await off(undefined, 'r-1', 'fp-c')).toBe('new');
  });
});
