import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destinationSubject, type Fetcher, type JournalEvent, readJournal } from '@requester/shared';
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
  type ResultCollector,
  type StackEnv,
  stackKey,
  startStackUnderTest,
  stopStackUnderTest,
} from './stack.fixture.ts';

/**
 * Operating destinations on a real stack (issue 44). Recover: requests to a destination that
 * failed for good at a real target (a 5xx with no attempt left, a 4xx) before, within and after a
 * range; once the target is back, recover re-sends exactly the range's failures, each once, and
 * the journal tells each re-sent request's story from the recover that sent it. Each change by
 * the CLI or the admin API is an operator action with its actor, in the destination's own
 * journal with the version made and no secret, and a deleted destination's
 * requests are refused. A result states the retries and timeout that applied, the caller's
 * where it asked for less.
 */
describe('destinations: operations end to end', () => {
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;
  let results: ResultCollector;
  let fetcher: Fetcher;
  let caller: Awaited<ReturnType<typeof stackKey>>;
  let operator: Awaited<ReturnType<typeof stackKey>>;

  beforeAll(async () => {
    target = await startTarget();
    // The origin's breaker is not under test: the 5xx answers must reach the retry decision.
    ({ stack, running, results } = await startStackUnderTest({
      KAFKA_TOPIC_PARTITIONS: '1',
      BREAKER_FAILURE_THRESHOLD: '100',
      CREDENTIALS_CACHE_TTL: '200ms',
      CREDENTIALS_MASTER_KEY: `e2e:${randomBytes(32).toString('base64')}`,
    }));
    fetcher = testKafka(stack.name).fetcher();
    caller = await stackKey(stack);
    operator = await stackKey(stack, { admin: 'write' });
  }, 120_000);

  afterAll(async () => {
    await fetcher?.close();
    await stopStackUnderTest({ stack, running, results });
    await target?.close();
  }, 60_000);

  const cli = (...args: string[]) =>
    requesterInProcess(['destinations', ...args], { ...stack.env, CLI_ACTOR: 'alice' });
  const admin = (verb: string, body: unknown) =>
    fetch(`${stack.adminUrl}/admin/api/destinations/${verb}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify(body),
    });
  const post = (destination: string, uri: string, meta: Record<string, unknown> = {}) =>
    fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...caller.headers },
      body: JSON.stringify({ request: { uri }, meta: { requestId: uniqueName('r'), destination, ...meta } }),
    });
  /** Sends one request to `billing` per path, and waits for every result. */
  const send = async (paths: string[]): Promise<Map<string, string>> => {
    const ids = new Map<string, string>();
    for (const path of paths) {
      const reply = await post('billing', path);
      const text = await reply.text();
      expect(reply.status, text).toBe(202);
      ids.set(path, (JSON.parse(text) as { requestId: string }).requestId);
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
    const previewed = JSON.parse(preview.stdout) as { replayed: Array<{ requestId: string; dlq: string }> };
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
      const from = previewed.replayed.find((r) => r.requestId === id)?.dlq;
      expect(from).toMatch(new RegExp(`^${stack.config.topicDlq.replaceAll('.', '\\.')}/0/\\d+$`));
      expect(replayed).toEqual([
        expect.objectContaining({ by: 'requester destinations recover billing', dlq: from }),
      ]);
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

    // The admin API's replay of the destination's range (its recover there): nothing left to send.
    const viaApi = await fetch(`${stack.adminUrl}/admin/api/dlq/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operator.headers },
      body: JSON.stringify({ destination: 'billing', since, until }),
    });
    expect(viaApi.status, await viaApi.text()).toBe(200);
    expect(target.calls.length).toBe(callsBefore + 2);

    // The destination's journal: its creation and each recover run, the preview (--dry-run) not.
    let story: JournalEvent[] = [];
    await eventually(
      async () => {
        story = await readJournal(fetcher, stack.config.topicEvents, {
          requestId: destinationSubject('billing'),
        });
        return story.length >= 4;
      },
      30_000,
      'the journal of destination billing',
    );
    expect(
      story.map((e) => (e.type === 'admin_action' ? `${e.action} ${e.actor} ${e.destination}` : e.type)),
    ).toEqual([
      'destinations.create cli:alice billing',
      'destinations.recover cli:alice billing',
      'destinations.recover cli:alice billing',
      `dlq.replay ${operator.name} billing`,
    ]);
  }, 60_000);

  it('create, update and delete by the CLI and the admin API are operator actions with their actor, in the destination’s journal; a deleted destination is refused', async () => {
    // Secret header values, one per face: the journal must never hold them.
    const cliSecret = `cli-secret-${randomBytes(8).toString('hex')}`;
    const apiSecret = `api-secret-${randomBytes(8).toString('hex')}`;
    const secretFile = join(tmpdir(), `${stack.name}-secret-headers`);
    writeFileSync(secretFile, `X-Api-Key: ${cliSecret}\n`, { mode: 0o600 });
    for (const [command, args] of [
      ['destinations', ['create', 'cli-made', '--base-url', target.url, '--secret-header-file', secretFile]],
      ['destinations', ['update', 'cli-made', '--timeout', '3s']],
      ['pause', ['destination', 'cli-made']],
      ['resume', ['destination', 'cli-made']],
      ['destinations', ['update', 'cli-made', '--timeout', 'soon']],
      ['destinations', ['delete', 'cli-made']],
    ] as const) {
      const done = await requesterInProcess([command, ...args], { ...stack.env, CLI_ACTOR: 'alice' });
      // The refused update (not a duration) is recorded as failed.
      expect(done.code, done.stderr).toBe((args as readonly string[]).includes('soon') ? 2 : 0);
    }
    rmSync(secretFile);
    const created = await admin('create', {
      name: 'api-made',
      spec: { baseUrl: target.url, secretHeaders: { 'X-Api-Key': apiSecret } },
    });
    expect(created.status, await created.text()).toBe(200);
    const updated = await admin('update', { name: 'api-made', spec: { timeout: '3s' } });
    expect(updated.status, await updated.text()).toBe(200);
    const accepted = await post('api-made', '/ok?before=delete');
    expect(accepted.status, await accepted.text()).toBe(202);
    const deleted = await admin('delete', { name: 'api-made' });
    const deletedText = await deleted.text();
    expect(deleted.status, deletedText).toBe(200);
    expect(JSON.parse(deletedText)).toEqual({ deleted: 'api-made' });

    // Gone from every face; a second delete says so.
    const shown = await fetch(`${stack.adminUrl}/admin/api/destinations/api-made`, {
      headers: operator.headers,
    });
    expect(shown.status).toBe(400);
    expect(await shown.text()).toContain('no destination named api-made');
    const listed = (await (
      await fetch(`${stack.adminUrl}/admin/api/destinations`, { headers: operator.headers })
    ).json()) as Array<{ name: string }>;
    expect(listed.map((d) => d.name)).not.toContain('api-made');
    const again = await admin('delete', { name: 'api-made' });
    expect(again.status).toBe(400);
    // Its requests are refused at the door once the ingress's cache (CREDENTIALS_CACHE_TTL) ends.
    await eventually(
      async () => {
        const reply = await post('api-made', '/ok?after=delete');
        if (reply.status === 202) return false;
        expect(reply.status).toBe(400);
        expect(await reply.json()).toMatchObject({ issues: [{ path: 'meta.destination' }] });
        return true;
      },
      30_000,
      'a request to the deleted destination refused',
    );

    // Each change recorded with its actor: the admin key's name, or cli:<CLI_ACTOR>. The CLI ran
    // in this process, so its record is on the same /metrics as the stack's.
    const metrics = await (await fetch(`${stack.adminUrl}/metrics`)).text();
    for (const [action, actor] of [
      ['create', 'cli:alice'],
      ['update', 'cli:alice'],
      ['delete', 'cli:alice'],
      ['create', operator.name],
      ['update', operator.name],
      ['delete', operator.name],
    ])
      expect(metrics).toMatch(
        new RegExp(
          `admin_actions_total\\{(?=[^}]*action="destinations\\.${action}")(?=[^}]*actor="${actor}")(?=[^}]*outcome="done")[^}]*\\} [1-9]`,
        ),
      );

    // Each change is in the destination's own journal once, with its actor, the version it made
    // and its outcome (a refused one failed): the CLI's read by `destinations history`, the admin
    // API's by its history endpoint.
    const actions = (events: JournalEvent[]) =>
      events.map((e) =>
        e.type === 'admin_action' ? [e.action, e.actor, e.version ?? null, e.outcome] : [e.type],
      );
    let cliStory: JournalEvent[] = [];
    await eventually(
      async () => {
        const history = await cli('history', 'cli-made', '--json');
        expect(history.code, history.stderr).toBe(0);
        cliStory = JSON.parse(history.stdout) as JournalEvent[];
        return cliStory.length >= 6;
      },
      30_000,
      'the journal of destination cli-made',
    );
    expect(actions(cliStory)).toEqual([
      ['destinations.create', 'cli:alice', 1, 'done'],
      ['destinations.update', 'cli:alice', 2, 'done'],
      ['pause', 'cli:alice', null, 'done'],
      ['resume', 'cli:alice', null, 'done'],
      ['destinations.update', 'cli:alice', null, 'failed'],
      ['destinations.delete', 'cli:alice', null, 'done'],
    ]);
    let apiStory: JournalEvent[] = [];
    await eventually(
      async () => {
        const reply = await fetch(`${stack.adminUrl}/admin/api/destinations/api-made/history`, {
          headers: operator.headers,
        });
        expect(reply.status).toBe(200);
        apiStory = ((await reply.json()) as { events: JournalEvent[] }).events;
        return apiStory.length >= 4;
      },
      30_000,
      'the journal of destination api-made',
    );
    expect(actions(apiStory)).toEqual([
      ['destinations.create', operator.name, 1, 'done'],
      ['destinations.update', operator.name, 2, 'done'],
      ['destinations.delete', operator.name, null, 'done'],
      ['destinations.delete', operator.name, null, 'failed'],
    ]);
    for (const e of [...cliStory, ...apiStory]) expect(e).not.toHaveProperty('client');
    // The operator UI's page of the destination draws the same history.
    const uiPage = await fetch(`${stack.adminUrl}/ui/destinations/api-made`, { headers: operator.headers });
    expect(uiPage.status).toBe(200);
    expect(await uiPage.text()).toContain('data-events="/admin/api/destinations/api-made/history"');

    // No secret in the journal's records of either, as Kafka holds them.
    for (const name of ['cli-made', 'api-made']) {
      const records = await fetcher.readKey(stack.config.topicEvents, destinationSubject(name), 0);
      const raw = records.map((r) => r.value?.toString('utf8') ?? '').join('\n');
      expect(raw).toContain('destinations.create');
      expect(raw).not.toContain(cliSecret);
      expect(raw).not.toContain(apiSecret);
    }
    // A caller cannot read a destination's journal as a request's.
    const asRequest = await fetch(
      `${stack.httpUrl}/requests/${encodeURIComponent(destinationSubject('api-made'))}/events`,
      { headers: caller.headers },
    );
    expect(asRequest.status).toBe(404);
  }, 60_000);

  it('the result states the retries and timeout that applied: the caller’s where it asked for less', async () => {
    const created = await admin('create', {
      name: 'pinned',
      spec: { baseUrl: target.url, retry: { max: 3, delay: '0s' }, timeout: '5s' },
    });
    expect(created.status, await created.text()).toBe(200);
    target.switches.set('lowered', 503);
    const asIs = await post('pinned', '/ok?policy=pinned');
    const lowered = await post('pinned', '/switch/lowered', {
      retry: { max: 2, delay: '0s' },
      timeout: '1s',
    });
    const [asIsId, loweredId] = await Promise.all(
      [asIs, lowered].map(async (reply) => {
        const text = await reply.text();
        expect(reply.status, text).toBe(202);
        return (JSON.parse(text) as { requestId: string }).requestId;
      }),
    );
    expect((await results.one(asIsId as string)).meta.destination).toEqual({
      name: 'pinned',
      version: 1,
      retryMax: 3,
      timeout: '5s',
    });
    const result = await results.one(loweredId as string);
    expect(result.response.status).toBe(503);
    expect(result.meta.tryCount).toBe(2);
    expect(result.meta.destination).toEqual({
      name: 'pinned',
      version: 1,
      retryMax: 2,
      timeout: '1s',
      lowered: ['retry', 'timeout'],
    });
    expect(callsTo('/switch/lowered')).toBe(2);
  }, 60_000);
});
