import { Cancellations } from '@requester/shared/cancel';
import type { Journal, JournalEventInput } from '@requester/shared/journal';
import { Announcements, Redis } from '@requester/shared/redis';
import { killSubscriber, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalBulkhead } from '../bulkhead/index.ts';
import { ExecutorHarness } from './harness.fixture.ts';

/** Cancellations that count the single reads (`find`) the executor makes: the reads skipped are the point. */
class CountedCancellations extends Cancellations {
  finds = 0;
  override find(...args: Parameters<Cancellations['find']>) {
    this.finds++;
    return super.find(...args);
  }
}

/**
 * Cancels of tasks parked for a bulkhead slot (docs/architecture.md §14, "Round trips"): one
 * origin, one slot, a call holding it 2 s, and a second task of the origin leased meanwhile, read
 * (its cancel with its lease batch), refused and parked until the slot is free, more than a second
 * after its lease. With the cancel watch it reads its cancel again only when one was announced
 * since; a cancel written while it waits is honoured, announced or not (subscriber lost).
 */
describe('cancels of parked tasks, watched', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  function recordingJournal(): Journal & { events: JournalEventInput[] } {
    const events: JournalEventInput[] = [];
    return { events, emit: (event) => void events.push(event), close: async () => {} };
  }

  /** An executor with one slot per origin and watched (counted) cancels on a named connection. */
  async function start() {
    const name = uniqueName('cancel-watch');
    // Named, as its subscriber (a duplicate) is: a test may drop that subscriber alone.
    const redis = new Redis('redis://127.0.0.1:6379', { connectionName: name });
    const prefix = h.prefix('cancels');
    const cancellations = new CountedCancellations(redis, prefix, 60_000);
    const announcements = new Announcements(redis, [cancellations.channel], { what: 'cancel' });
    cancellations.watch(announcements);
    h.onClose(async () => {
      await announcements.close();
      redis.disconnect();
    });
    while (cancellations.mark() === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
    const journal = recordingJournal();
    const { queue } = h.startExecutor({
      bulkhead: new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 0 }),
      cancellations,
      journal,
    });
    const canceller = new Cancellations(h.redis, prefix, 60_000); // another process's: the API's
    return { name, queue, cancellations, journal, canceller, prefix };
  }

  /** A 2 s call holding the origin's one slot, then a task parked behind it; resolves once it is parked. */
  async function parkBehindSlowCall(parts: Awaited<ReturnType<typeof start>>, run: string) {
    const slow = {
      request: { uri: `${h.target.url}/slow/2000?run=${run}&n=slow` },
      meta: { requestId: `${run}-slow` },
    };
    const parked = {
      request: { uri: `${h.target.url}/echo?run=${run}&n=parked` },
      meta: { requestId: `${run}-parked` },
    };
    await h.submit(parts.queue, [slow]);
    await h.until(() => h.callsWith(`run=${run}&n=slow`)[0]);
    await h.submit(parts.queue, [parked]);
    await h.until(() =>
      parts.journal.events.find(
        (e) => e.type === 'held' && e.requestId === parked.meta.requestId && e.by === 'bulkhead',
      ),
    );
    return { slow: slow.meta.requestId, parked: parked.meta.requestId };
  }

  it('a task woken with its slot more than a second after its lease reads no cancel again when none was announced', async () => {
    const parts = await start();
    const run = uniqueName('quiet');
    const { slow, parked } = await parkBehindSlowCall(parts, run);
    const result = await h.resultOf(parked);
    expect(result.response.status).toBe(200);
    expect((await h.resultOf(slow)).response.status).toBe(200);
    // Before: one GET, the lease batch's read being more than CANCEL_FRESH_MS old.
    expect(parts.cancellations.finds).toBe(0);
  }, 30_000);

  it('a cancel announced while the task is parked is read and honoured: cancelled, never called', async () => {
    const parts = await start();
    const run = uniqueName('announced');
    const { slow, parked } = await parkBehindSlowCall(parts, run);
    await parts.canceller.record(undefined, parked, 'cli:test');
    const result = await h.resultOf(parked);
    expect(result.meta.error?.code).toBe('cancelled');
    expect(h.callsWith(`run=${run}&n=parked`)).toEqual([]);
    expect((await h.resultOf(slow)).response.status).toBe(200);
    expect(parts.cancellations.finds).toBe(1);
  }, 30_000);

  it('a cancel written while the subscriber was lost (not heard) is read and honoured', async () => {
    const parts = await start();
    const run = uniqueName('lost');
    const { parked } = await parkBehindSlowCall(parts, run);
    const markBefore = parts.cancellations.mark();
    await killSubscriber(h.redis, parts.name);
    // Written without its announcement, as one announced while the subscriber was away would be missed.
    await h.redis.set(`${parts.prefix}:cancel:${parked}`, JSON.stringify({ by: 'cli:test', at: Date.now() }));
    // Subscribed again before the task is woken: only the loss tells that its read may be stale.
    while ((parts.cancellations.mark()?.heard ?? 0) <= (markBefore?.heard ?? 0))
      await new Promise((resolve) => setTimeout(resolve, 5));
    const result = await h.resultOf(parked);
    expect(result.meta.error?.code).toBe('cancelled');
    expect(h.callsWith(`run=${run}&n=parked`)).toEqual([]);
  }, 30_000);
});
