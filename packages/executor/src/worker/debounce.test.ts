import { Debounces } from '@requester/shared/debounce';
import type { Journal, JournalEventInput } from '@requester/shared/journal';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * The executor's debounce check (prechecks.ts): a task of `meta.debounce` that is no longer its
 * key's latest ends `debounced` naming it, uncalled; the latest is called; Redis unreadable, every
 * task is called (fail open). The bursts are entered as the router enters them.
 */
describe('executor: debounced tasks', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  function recordingJournal(): Journal & { events: JournalEventInput[] } {
    const events: JournalEventInput[] = [];
    return { events, emit: (event) => void events.push(event), close: async () => {} };
  }

  const envelope = (run: string, n: number, key: string) => ({
    request: { uri: `${h.target.url}/echo?run=${run}&n=${n}` },
    meta: { requestId: `${run}-${n}`, debounce: { key, delay: '1s' } },
  });

  it('calls only the latest of a burst; each other ends debounced, naming it', async () => {
    const debounces = new Debounces(h.redis, h.prefix('debounce'));
    const journal = recordingJournal();
    const { queue } = h.startExecutor({ debounces, journal });
    const run = uniqueName('burst');
    const now = Date.now();
    for (const n of [0, 1, 2])
      await debounces.enter(undefined, `${run}-${n}`, { key: run, delay: '1s' }, now + n);
    await h.submit(
      queue,
      [0, 1, 2].map((n) => envelope(run, n, run)),
    );
    expect((await h.resultOf(`${run}-2`)).response.status).toBe(200);
    for (const n of [0, 1]) {
      const result = await h.resultOf(`${run}-${n}`);
      expect(result.response.status).toBe(409);
      expect(result.meta).toMatchObject({
        tryCount: 0,
        error: { code: 'debounced' },
        debounced: { by: `${run}-2` },
      });
      expect(journal.events).toContainEqual(
        expect.objectContaining({ type: 'debounced', requestId: `${run}-${n}`, by: `${run}-2`, key: run }),
      );
    }
    expect(h.callsWith(`run=${run}&`).map((call) => call.path)).toEqual([`/echo?run=${run}&n=2`]);
  });

  it('calls every task when the debounce state cannot be read (fail open)', async () => {
    const down = { replacedBy: () => Promise.reject(new Error('Redis away')) };
    const { queue } = h.startExecutor({ debounces: down });
    const run = uniqueName('open');
    await h.submit(
      queue,
      [0, 1].map((n) => envelope(run, n, run)),
    );
    for (const n of [0, 1]) expect((await h.resultOf(`${run}-${n}`)).response.status).toBe(200);
    expect(h.callsWith(`run=${run}&`)).toHaveLength(2);
  });
});
