import { describe, expect, it } from 'vitest';
import { LocalBulkhead } from '../../bulkhead/index.ts';
import { ANSWER, request, walkThrough } from '../walk.fixture.ts';
import { bulkhead } from './bulkhead.ts';

const origin = 'http://127.0.0.1:9';

describe('the bulkhead gate', () => {
  it('passes without a bulkhead', async () => {
    const walk = walkThrough(bulkhead);
    expect((await walk.run(request())).answer).toBe(ANSWER);
  });

  it('holds a slot of the origin through the call, refuses a call over the cap, frees the slot after', async () => {
    const cap = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 0 });
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    let calls = 0;
    const walk = walkThrough(bulkhead, { bulkhead: cap }, async () => {
      calls += 1;
      if (calls === 1) await answered;
      return ANSWER;
    });
    const first = walk.run(request());
    while (walk.reached.length === 0) await new Promise((resolve) => setImmediate(resolve));
    expect(walk.reached[0]?.slot).toEqual({ inFlight: 1, full: true });

    const refused = await walk.run(request());
    expect(refused.answer).toMatchObject({ kind: 'failure', stop: { kind: 'wait', reason: 'bulkhead' } });
    expect(walk.reached).toHaveLength(1);

    answer();
    expect((await first).answer).toBe(ANSWER);
    // Released with the answer: the next call gets the slot.
    expect((await walk.run(request())).answer).toBe(ANSWER);
    const probe = await cap.acquire(origin, undefined, undefined, false);
    expect(probe.granted).toBe(true);
    if (probe.granted) probe.release();
  });

  it('uses a slot handed to a parked task instead of asking, and releases it once', async () => {
    const cap = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 0 });
    const handed = await cap.acquire(origin, undefined, undefined, false);
    if (!handed.granted) throw new Error('the first slot of an empty origin is granted');
    const walk = walkThrough(bulkhead, { bulkhead: cap });
    expect((await walk.run(request(), { handed })).answer).toBe(ANSWER);
    handed.release(); // the worker's own release after the attempt: a second one does nothing
    const again = await cap.acquire(origin, undefined, undefined, false);
    expect(again.granted).toBe(true);
    const over = await cap.acquire(origin, undefined, undefined, false);
    expect(over.granted).toBe(false);
    if (again.granted) again.release();
  });
});
