import { type Fetcher, type JournalEvent, readJournal } from '@requester/shared';
import {
  eventually,
  readTopic,
  startTarget,
  type Target,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requesterInProcess } from '../cli.fixture.ts';
import {
  dropStackDatabase,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * `requester destinations recover` on a real stack (issue 44): requests to a destination that
 * failed for good at a real target (a 5xx with no attempt left, a 4xx) before, within and after a
 * range; once the target is back, recover re-sends exactly the range's failures, each once, and
 * the journal tells each re-sent request's story from the recover that sent it.
 */
describe('destinations recover, end to end', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let fetcher: Fetcher;
  let caller: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    target = await startTarget();
    // The origin's breaker is not under test: the 5xx answers must reach the retry decision.
    stack = await stackEnv({ KAFKA_TOPIC_PARTITIONS: '1', BREAKER_FAILURE_THRESHOLD: '100' });
    running = await startStack(stack);
    await waitReady(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    fetcher = testKafka(stack.name).fetcher();
    caller = await stackKey(stack);
  }, 120_000);

  afterAll(async () => {
    await fetcher?.close();
    await results?.stop();
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const cli = (...args: string[]) => requesterInProcess(['destinations', ...args], stack.env);
  /** Sends one request to `billing` per path, and waits for every result. */
  const send = async (paths: string[]): Promise<Map<string, string>> => {
    const ids = new Map<string, string>();
    for (const path of paths) {
      const requestId = uniqueName('r');
      ids.set(path, requestId);
      const reply = await fetch(`${stack.httpUrl}/request`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...caller.headers },
        body: JSON.stringify({ request: { uri: path }, meta: { requestId, destination: 'billing' } }),
      });
      expect(reply.status, await reply.text()).toBe(202);
    }
    for (const id of ids.values()) await results.one(id);
    return ids;
  };
  /** A range bound after every dead letter so far and before any to come (failedAt has ms precision). */
  const boundary = async (): Promise<string> => {
    const at = Date.now() + 1;
    while (Date.now() <= at) await new Promise((resolve) => setTimeout(resolve, 1));
    return new Date(at).toISOString();
  };
  const callsTo = (path: string) => target.calls.filter((c) => c.path === path).length;

  it('previews, then re-sends exactly the failures of the range, each once, journalled as recovered', async () => {
    const created = await cli('create', 'billing', '--base-url', target.url);
    expect(created.code, created.stderr).toBe(0);
    // Each `/switch/<key>` answers what the test set for it: a 500 fails for good at the
    // destination's one attempt (retries exhausted), a 422 at once (permanent).
    for (const [key, status] of [
      ['before', 500],
      ['in-5xx', 500],
      ['in-4xx', 422],
      ['after', 500],
    ] as const)
      target.switches.set(key, status);
    const before = await send(['/switch/before', '/ok?n=1']);
    const since = await boundary();
    const within = await send(['/switch/in-5xx', '/ok?n=2', '/switch/in-4xx']);
    const until = await boundary();
    const after = await send(['/switch/after', '/ok?n=3']);
    const failed = [before, within, after].map((ids) =>
      [...ids].filter(([path]) => path.startsWith('/switch')),
    );
    for (const [path, id] of failed.flat())
      expect(results.byId.get(id)?.[0]?.response.status, path).toBe(target.switches.get(path.slice(8)));
    await readTopic(stack.config.topicDlq, (records) => records.length >= 4);
    const recovered = [within.get('/switch/in-5xx'), within.get('/switch/in-4xx')] as string[];

    // The partner is fixed; nothing has been sent again yet.
    target.switches.clear();
    const callsBefore = target.calls.length;
    const range = ['--since', since, '--until', until, '--json'];
    const preview = await cli('recover', 'billing', ...range, '--dry-run');
    expect(preview.code, preview.stderr).toBe(0);
    const previewed = JSON.parse(preview.stdout) as { replayed: Array<{ requestId: string }> };
    expect(previewed.replayed.map((r) => r.requestId).sort()).toEqual([...recovered].sort());
    expect(target.calls.length).toBe(callsBefore);

    const run = await cli('recover', 'billing', ...range);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/replayed 2\/2/);
    await results.until(
      () => recovered.every((id) => results.byId.get(id)?.length === 2),
      30_000,
      'the second result of each recovered request',
    );
    for (const id of recovered) {
      const again = results.byId.get(id)?.[1];
      expect(again?.response.status).toBe(200);
      expect(again?.meta.destination).toMatchObject({ name: 'billing', version: 1 });
    }
    // The target saw each failure of the range once more, and nothing else.
    expect(target.calls.length).toBe(callsBefore + 2);
    expect(['in-5xx', 'in-4xx', 'before', 'after'].map((key) => callsTo(`/switch/${key}`))).toEqual([
      2, 2, 1, 1,
    ]);

    for (const id of recovered) {
      let story: JournalEvent[] = [];
      await eventually(
        async () => {
          story = await readJournal(fetcher, stack.config.topicEvents, { requestId: id });
          return story.filter((e) => e.type === 'completed').length === 2;
        },
        30_000,
        `the journal of ${id} up to its second result`,
      );
      const replayed = story.filter((e) => e.type === 'replayed');
      expect(replayed).toEqual([expect.objectContaining({ by: 'requester destinations recover billing' })]);
      // Its story after the recover: routed again, one attempt, a success.
      const steps = story.slice(story.indexOf(replayed[0] as JournalEvent)).map((e) => e.type);
      expect(steps.filter((t) => t === 'attempt')).toHaveLength(1);
      expect(steps.at(-1)).toBe('completed');
    }

    // Run again: each once; nothing more is sent.
    const again = await cli('recover', 'billing', ...range);
    expect(again.code, again.stderr).toBe(0);
    expect((JSON.parse(again.stdout) as { replayed: unknown[] }).replayed).toHaveLength(0);
    expect(target.calls.length).toBe(callsBefore + 2);
  }, 60_000);
});
