import { afterAll, describe, expect, it } from 'vitest';
import { closeProducer, kafka, producer, send, silent, topics } from '../../test/kit.fixture.ts';
import { followResults } from './index.ts';

afterAll(closeProducer);

describe('followResults', () => {
  it('skips what was on out before it started and sees what is produced right after', async () => {
    const { out } = await topics(3);
    for (let i = 0; i < 3; i++) await send(out, `old-${i}`, { meta: { requestId: `old-${i}` } });

    const seen: string[] = [];
    const following = await followResults({
      kafka,
      topic: out,
      logger: silent,
      onResult: (id) => seen.push(id),
    });
    try {
      expect(following.groupId).toMatch(/^requester-sync-.+-\d+-[0-9a-f]{8}$/);
      // Produced the instant start resolved, on every partition: none may be missed.
      const fresh = Array.from({ length: 12 }, (_, i) => `new-${i}`);
      await Promise.all(fresh.map((id) => send(out, id, { meta: { requestId: id } })));
      await expect.poll(() => seen.length, { timeout: 20_000 }).toBe(fresh.length);
      expect([...seen].sort()).toEqual([...fresh].sort());
    } finally {
      await following.stop();
    }
  });

  it('reads the requestId from the value when the record has no key', async () => {
    const { out } = await topics(1);
    const seen: Array<[string, string]> = [];
    const following = await followResults({
      kafka,
      topic: out,
      logger: silent,
      onResult: (id, json) => seen.push([id, json]),
    });
    try {
      const value = JSON.stringify({ meta: { requestId: 'unkeyed' } });
      await (await producer()).send(out, [{ value }, { value: 'not json' }]);
      await expect.poll(() => seen, { timeout: 20_000 }).toEqual([['unkeyed', value]]);
    } finally {
      await following.stop();
    }
  });

  it('skips what it cannot read, so the caller still gets the real result', async () => {
    const { out } = await topics(1);
    const seen: Array<[string, string]> = [];
    const following = await followResults({
      kafka,
      topic: out,
      logger: silent,
      onResult: (id, json) => seen.push([id, json]),
    });
    try {
      const value = JSON.stringify({
        response: { status: 200, body: '', headers: {} },
        meta: { requestId: 'x' },
      });
      await (await producer()).send(out, [
        { key: 'x', value: '{garbage' },
        { key: 'x', value: '[1,2]' },
        { key: 'x', value: null },
        { key: 'x', value: JSON.stringify({ meta: 'no object' }) },
        { key: 'x', value },
      ]);
      await expect.poll(() => seen, { timeout: 20_000 }).toEqual([['x', value]]);
    } finally {
      await following.stop();
    }
  });

  it('hands keyed records to onUnread as their raw JSON, read (and checked) only by idOf', async () => {
    const { out } = await topics(1);
    const unread: Array<[string, string]> = [];
    const ids: Array<string | undefined> = [];
    const results: string[] = [];
    const following = await followResults({
      kafka,
      topic: out,
      logger: silent,
      onResult: (id) => results.push(id),
      onUnread: (key, json, idOf) => {
        unread.push([key, json]);
        ids.push(idOf(json, key));
      },
    });
    try {
      const mine = JSON.stringify({ meta: { requestId: 'x', client: 'c1' } });
      const unkeyed = JSON.stringify({ meta: { requestId: 'y' } });
      await (await producer()).send(out, [
        { key: 'x', value: '{garbage' },
        { key: 'x', value: mine },
        { value: unkeyed },
      ]);
      await expect.poll(() => results, { timeout: 20_000 }).toEqual(['y']);
      expect(unread).toEqual([
        ['x', '{garbage'],
        ['x', mine],
      ]);
      expect(ids).toEqual([undefined, 'x @c1']);
    } finally {
      await following.stop();
    }
  });
});
