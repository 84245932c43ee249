import { type Fetcher, type JournalEvent, readJournal } from '@requester/shared';
import { eventually, startTarget, type Target, testKafka } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { requester } from '../cli.fixture.ts';
import {
  dropStackDatabase,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * The task journal across every role (EVENTS=all, the default): each request's story on
 * KAFKA_TOPIC_EVENTS, in order, for the paths an operator asks about; `requester trace` and
 * `GET /requests/{id}/events` tell it, the latter only to the key that sent the request.
 */
describe('end to end: the task journal', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let owner: Awaited<ReturnType<typeof stackKey>>;
  let other: Awaited<ReturnType<typeof stackKey>>;
  let fetcher: Fetcher;

  beforeAll(async () => {
    target = await startTarget();
    stack = await stackEnv({ REDIS_HORIZON: '1s' });
    running = await startStack(stack);
    await waitReady(stack);
    [owner, other] = [await stackKey(stack), await stackKey(stack)];
    fetcher = testKafka(stack.name).fetcher();
  }, 120_000);

  afterAll(async () => {
    await fetcher?.close();
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  const post = async (body: unknown, headers: Record<string, string> = owner.headers) => {
    const reply = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    expect(reply.status).toBe(202);
  };
  /** The story once it has ended (completed or dead-lettered, and `last` more events after that). */
  const storyOf = async (requestId: string, until = (events: JournalEvent[]) => ended(events)) => {
    let events: JournalEvent[] = [];
    await eventually(
      async () => {
        events = await readJournal(fetcher, stack.config.topicEvents, { requestId });
        return until(events);
      },
      30_000,
      `journal of ${requestId}`,
    );
    return events;
  };
  const steps = (events: JournalEvent[]) =>
    events.map((e) => {
      if (e.type === 'attempt') return `attempt ${e.n} ${e.status ?? e.error}`;
      if (e.type === 'routed') return `routed ${e.to}`;
      if (e.type === 'held') return `held ${e.by}`;
      if (e.type === 'completed') return `completed ${e.status}`;
      if (e.type === 'retry_scheduled') return `retry ${e.where}`;
      return e.type;
    });

  it('a first-attempt success: accepted → routed → leased → attempt 1 → completed', async () => {
    await post({ request: { uri: `${target.url}/echo?id=j-ok` }, meta: { requestId: 'j-ok' } });
    const story = await storyOf('j-ok');
    expect(steps(story)).toEqual(['accepted', 'routed redis', 'leased', 'attempt 1 200', 'completed 200']);
    expect(story[0]).toMatchObject({ type: 'accepted', channel: 'http', client: owner.name });
    expect(story.map((e) => e.at)).toEqual([...story.map((e) => e.at)].sort((a, b) => a - b));
  });

  it('a retry (503 then 200): the failed attempt, the retry waiting parked in its executor, the second attempt', async () => {
    await post({
      request: { uri: `${target.url}/flaky/j-retry/1?status=503` },
      meta: { requestId: 'j-retry', retry: { max: 3, delay: '100ms' } },
    });
    expect(steps(await storyOf('j-retry'))).toEqual([
      'accepted',
      'routed redis',
      'leased',
      'attempt 1 503',
      // A 5xx is a sign of overload: the origin's adaptive limit comes down, and the story says so.
      'throttled',
      // A retry due within 30 s waits parked under its lease: no second lease.
      'retry executor',
      'attempt 2 200',
      'completed 200',
    ]);
  });

  it('a limiter hold: the second request of a full window is held, then runs', async () => {
    const limiter = {
      key: 'j-lim',
      algorithm: 'sliding-window-log',
      rates: [{ duration: '800ms', value: 1 }],
    };
    for (const requestId of ['j-lim-1', 'j-lim-2'])
      await post({ request: { uri: `${target.url}/echo?id=${requestId}` }, meta: { requestId, limiter } });
    const stories = [await storyOf('j-lim-1'), await storyOf('j-lim-2')];
    const held = stories.find((s) => s.some((e) => e.type === 'held'));
    // Held once or more (the window's end is approximate), then run once.
    const told = steps(held ?? []);
    expect(told.slice(0, 4)).toEqual(['accepted', 'routed redis', 'leased', 'held limiter']);
    expect(told.slice(-3)).toEqual(['leased', 'attempt 1 200', 'completed 200']);
  });

  it('a dead letter: the permanent failure is completed and dead-lettered', async () => {
    await post({ request: { uri: `${target.url}/status/404?id=j-dead` }, meta: { requestId: 'j-dead' } });
    const story = await storyOf('j-dead', (events) => events.some((e) => e.type === 'dead_lettered'));
    expect(steps(story)).toEqual([
      'accepted',
      'routed redis',
      'leased',
      'attempt 1 404',
      'completed 404',
      'dead_lettered',
    ]);
    expect(story.at(-1)).toMatchObject({ reason: 'permanent' });
  });

  it('a record written straight to in is accepted over Kafka by the router; a DLQ replay is not accepted again', async () => {
    const producer = testKafka().producer();
    await producer.connect();
    try {
      const envelope = { request: { uri: `${target.url}/echo?id=j-kafka` }, meta: { requestId: 'j-kafka' } };
      await producer.send(stack.config.topicIn, [{ key: 'j-kafka', value: JSON.stringify(envelope) }]);
    } finally {
      await producer.disconnect();
    }
    const story = await storyOf('j-kafka');
    expect(steps(story)).toEqual(['accepted', 'routed redis', 'leased', 'attempt 1 200', 'completed 200']);
    expect(story[0]).toMatchObject({ channel: 'kafka' });

    await storyOf('j-dead', (events) => events.some((e) => e.type === 'dead_lettered'));
    const replay = await requester(['dlq', 'replay', '--request-id', 'j-dead'], stack.env).exit;
    expect(replay.code).toBe(0);
    const again = await storyOf(
      'j-dead',
      (events) => events.filter((e) => e.type === 'dead_lettered').length === 2,
    );
    // The operator's action, as the admin API journals it: stamped when the replay ended, so it
    // may fall anywhere among the re-sent request's steps.
    const actions = again.filter((e) => e.type === 'admin_action');
    expect(actions).toEqual([
      expect.objectContaining({
        action: 'dlq.replay',
        actor: expect.stringMatching(/^cli:/),
        outcome: 'done',
      }),
    ]);
    expect(steps(again.filter((e) => e.type !== 'admin_action')).slice(6)).toEqual([
      'replayed',
      'routed redis',
      'leased',
      'attempt 2 404', // a replay counts on from the attempts made (retryBase)
      'completed 404',
      'dead_lettered',
    ]);
  });

  it('a trip through the outbox: scheduled beyond the horizon, relayed back, then run', async () => {
    const scheduled = new Date(Date.now() + 2_500).toISOString();
    await post({
      request: { uri: `${target.url}/echo?id=j-later` },
      meta: { requestId: 'j-later', scheduled },
    });
    expect(steps(await storyOf('j-later'))).toEqual([
      'accepted',
      'routed outbox',
      'relayed',
      'routed redis',
      'leased',
      'attempt 1 200',
      'completed 200',
    ]);
  });

  it('no secret in events: no header, body or URL of the request, only ids, codes and timings', async () => {
    await post({
      request: {
        uri: `${target.url}/echo?id=j-secret&token=query-secret-1`,
        method: 'POST',
        headers: { authorization: 'Bearer header-secret-2' },
        body: 'body-secret-3',
      },
      meta: { requestId: 'j-secret' },
    });
    const text = JSON.stringify(await storyOf('j-secret'));
    expect(text).toContain('j-secret');
    for (const secret of ['query-secret-1', 'header-secret-2', 'body-secret-3', '/echo', owner.token])
      expect(text).not.toContain(secret);
  });

  it('requester trace prints the story in order with relative times; --json prints the events', async () => {
    await storyOf('j-retry');
    const text = await requester(['trace', 'j-retry'], stack.env).exit;
    expect(text.code).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^j-retry — \d{4}-/);
    expect(lines[1]).toMatch(/^ *\+0 ms {2}accepted over http from key-/);
    expect(lines.slice(1).map((l) => l.replace(/^ *\+\d+ ms {2}/, '').split(/[ :]/)[0])).toEqual([
      'accepted',
      'routed',
      'leased',
      'attempt',
      'the',
      'retry',
      'attempt',
      'completed',
    ]);
    expect(lines[4]).toMatch(/attempt 1: 503 in [\d.]+ ms$/);
    const json = await requester(['trace', 'j-retry', '--json'], stack.env).exit;
    expect((JSON.parse(json.stdout) as JournalEvent[]).map((e) => e.type)).toContain('retry_scheduled');
    const unknown = await requester(['trace', 'j-nobody', '--since', '5m'], stack.env).exit;
    expect(unknown).toMatchObject({
      code: 1,
      stdout: expect.stringContaining('no journal events for j-nobody'),
    });
  });

  it('GET /requests/{id}/events answers the owner key only: another key gets 404, as for an unknown id', async () => {
    await storyOf('j-ok');
    const get = (id: string, headers: Record<string, string>) =>
      fetch(`${stack.httpUrl}/requests/${id}/events`, { headers });
    const mine = await get('j-ok', owner.headers);
    expect(mine.status).toBe(200);
    const body = (await mine.json()) as { requestId: string; events: JournalEvent[] };
    expect(body.requestId).toBe('j-ok');
    expect(body.events.map((e) => e.type)).toEqual(['accepted', 'routed', 'leased', 'attempt', 'completed']);
    expect((await get('j-ok', other.headers)).status).toBe(404);
    expect((await get('j-nobody', owner.headers)).status).toBe(404);
    expect((await get('j-ok', {})).status).toBe(401);
    expect(
      (await fetch(`${stack.httpUrl}/requests/j-ok/events?since=nonsense`, { headers: owner.headers }))
        .status,
    ).toBe(400);
  });
});

function ended(events: JournalEvent[]): boolean {
  return events.some((e) => e.type === 'completed');
}
