import { createRequestContract } from '@requester/shared/contract';
import { decodeQueuedTask } from '@requester/shared/task';
import { describe, expect, it } from 'vitest';
import {
  debounceRoute,
  entersDebounce,
  type Fence,
  fenceRoute,
  routeRecord,
  type SourceRecord,
} from './route.ts';

const contract = createRequestContract();
const NOW = Date.parse('2026-12-01T09:00:00Z');
const HORIZON = 1_000;

function record(value: unknown, offset = '42'): SourceRecord {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return { topic: 'in', partition: 3, offset, key: Buffer.from('k'), value: Buffer.from(text) };
}

const envelope = (meta: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  request: { uri: 'https://api.example.com/x', method: 'POST', body: '{}' },
  meta: { requestId: 'r-1', ...meta },
  ...extra,
});

describe('routeRecord', () => {
  it('queues a request due now as an offset-ref in its own unordered partition', () => {
    const route = routeRecord(record(envelope()), contract, { now: NOW, horizonMs: HORIZON });
    expect(route.kind).toBe('queue');
    if (route.kind !== 'queue') return;
    expect(route.task).toMatchObject({ id: 'r-1:0', partition: '#r-1', dueAt: NOW });
    expect(decodeQueuedTask(route.task.payload)).toEqual({
      ref: { topic: 'in', partition: 3, offset: '42' },
      requestId: 'r-1',
      tryCount: 0,
    });
  });

  it("gives the task the request's meta.priority (none when 0, the queue's default)", () => {
    const high = routeRecord(record(envelope({ priority: 7 })), contract, { now: NOW, horizonMs: HORIZON });
    expect(high.kind === 'queue' && high.task.priority).toBe(7);
    const plain = routeRecord(record(envelope({ priority: 0 })), contract, { now: NOW, horizonMs: HORIZON });
    expect(plain.kind === 'queue' && 'priority' in plain.task).toBe(false);
  });

  it('carries a record of at most inlineMaxBytes in its task, with the headers the executor reads', () => {
    const value = record(envelope());
    const headers = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', other: 'x' };
    const size = value.value?.length ?? 0;
    const route = routeRecord({ ...value, headers }, contract, {
      now: NOW,
      horizonMs: HORIZON,
      inlineMaxBytes: size,
    });
    if (route.kind !== 'queue') throw new Error(route.kind);
    expect(decodeQueuedTask(route.task.payload).inline).toEqual({
      value: route.envelope,
      headers: { traceparent: headers.traceparent },
      checked: true,
    });
    // One byte over the bound: the ref alone.
    const over = routeRecord(value, contract, { now: NOW, horizonMs: HORIZON, inlineMaxBytes: size - 1 });
    if (over.kind !== 'queue') throw new Error(over.kind);
    expect(decodeQueuedTask(over.task.payload).inline).toBeUndefined();
  });

  it("carries the contract's output inline, marked checked (the executor does not run the contract again)", () => {
    const raw = { request: { uri: '' }, meta: { requestId: 'r-1', retry: { max: 2 } } };
    const route = routeRecord(record(raw), contract, { now: NOW, horizonMs: HORIZON, inlineMaxBytes: 1_000 });
    if (route.kind !== 'queue') throw new Error(route.kind);
    const inline = decodeQueuedTask(route.task.payload).inline;
    expect(inline?.checked).toBe(true);
    // Defaults applied: what the contract returns, not the raw record.
    expect(inline?.value).toEqual(route.envelope);
    expect(inline?.value).toMatchObject({
      request: { uri: '', method: 'GET' },
      meta: { retry: { max: 2, delay: '1s', maxDelay: '5m' } },
    });
    expect(contract.safeParse(inline?.value)).toEqual({ ok: true, value: inline?.value });
  });

  it('keeps the partition key (ordered `!` included), tryCount and createdAt', () => {
    const route = routeRecord(
      record(
        envelope(
          { partition: '!order-42', retry: { max: 3 } },
          { tryCount: 2, createdAt: '2026-12-01T08:59:59Z', waitTime: 2_000_000_000 },
        ),
      ),
      contract,
      { now: NOW, horizonMs: HORIZON },
    );
    if (route.kind !== 'queue') throw new Error(route.kind);
    expect(route.task.id).toBe('r-1:2:w2000'); // a waited task comes back under a new id
    expect(route.task.partition).toBe('!order-42');
    expect(decodeQueuedTask(route.task.payload)).toMatchObject({
      tryCount: 2,
      createdAt: NOW - 1_000,
      waitedMs: 2_000,
    });
  });

  it("puts a client's task id and partition in its namespace (queue and outbox alike)", () => {
    const of = (client: string) =>
      routeRecord(record(envelope({ partition: '!order-42', client })), contract, {
        now: NOW,
        horizonMs: HORIZON,
      });
    const [a, b] = [of('probe-a'), of('probe-b')];
    if (a.kind !== 'queue' || b.kind !== 'queue') throw new Error('not queued');
    expect(a.task).toMatchObject({ id: 'r-1:0 @probe-a', partition: '!order-42 @probe-a' });
    expect(b.task).toMatchObject({ id: 'r-1:0 @probe-b', partition: '!order-42 @probe-b' });
    const later = routeRecord(
      record(envelope({ client: 'probe-a', scheduled: '2026-12-02T09:00:00Z' })),
      contract,
      { now: NOW, horizonMs: HORIZON },
    );
    expect(later).toMatchObject({
      kind: 'outbox',
      row: { taskId: 'r-1:0 @probe-a', requestId: 'r-1', key: 'k' },
    });
  });

  it('queues a request scheduled within the horizon with its due time', () => {
    const route = routeRecord(record(envelope({ scheduled: '2026-12-01T09:00:00.500Z' })), contract, {
      now: NOW,
      horizonMs: HORIZON,
    });
    expect(route).toMatchObject({ kind: 'queue', task: { dueAt: NOW + 500 } });
  });

  it('sends a request scheduled beyond the horizon to the outbox with the full record', () => {
    const value = envelope({ scheduled: '2026-12-01T11:00:00+01:00', partition: 'p' });
    const route = routeRecord(record(value), contract, { now: NOW, horizonMs: HORIZON });
    if (route.kind !== 'outbox') throw new Error(route.kind);
    expect(route.row).toMatchObject({ taskId: 'r-1:0', requestId: 'r-1', topic: 'in', key: 'k' });
    expect(route.row.dueAt.toISOString()).toBe('2026-12-01T10:00:00.000Z');
    expect(JSON.parse(route.row.payload.toString())).toEqual(value);
  });

  it('queues a staged outbox row for its due time, however far ahead, and never sends it back to the outbox', () => {
    const later = NOW + 45_000;
    const staged = routeRecord(record(envelope({ scheduled: new Date(later).toISOString() })), contract, {
      now: NOW,
      horizonMs: HORIZON,
      stagedDueAt: later,
    });
    expect(staged).toMatchObject({ kind: 'queue', task: { dueAt: later } });
    // A rescheduled task's row: its envelope's `scheduled` has passed, the row's due time counts.
    const retry = routeRecord(
      record(envelope({ scheduled: '2026-12-01T08:00:00Z', retry: { max: 3 } }, { tryCount: 1 })),
      contract,
      { now: NOW, horizonMs: HORIZON, stagedDueAt: later },
    );
    expect(retry).toMatchObject({ kind: 'queue', task: { dueAt: later } });
    // The later of the two: a row never runs before its request's own schedule.
    const early = routeRecord(record(envelope({ scheduled: new Date(later).toISOString() })), contract, {
      now: NOW,
      horizonMs: HORIZON,
      stagedDueAt: NOW,
    });
    expect(early).toMatchObject({ kind: 'queue', task: { dueAt: later } });
  });

  it('sends an ordered request that was beyond the horizon when it reached in to the outbox, however late it is read', () => {
    const scheduled = '2026-12-01T09:00:00.500Z';
    const arrived = (timestamp: number | undefined, meta: Record<string, unknown>) =>
      routeRecord(
        {
          ...record(envelope({ scheduled, ...meta })),
          ...(timestamp === undefined ? {} : { timestamp: String(timestamp) }),
        },
        contract,
        { now: NOW, horizonMs: HORIZON },
      ).kind;
    // Reached `in` 60 s before its instant, read 0.5 s before it (a router behind `in`).
    expect(arrived(NOW - 59_500, { partition: '!o' })).toBe('outbox');
    // Within the horizon when it arrived, or an unordered one: queued as before.
    expect(arrived(NOW - 400, { partition: '!o' })).toBe('queue');
    expect(arrived(NOW - 59_500, { partition: 'u' })).toBe('queue');
    expect(arrived(NOW - 59_500, {})).toBe('queue');
    // No timestamp, or one ahead of the router's clock (not believed): the router's clock.
    expect(arrived(undefined, { partition: '!o' })).toBe('queue');
    expect(arrived(NOW + 60_000, { partition: '!o' })).toBe('queue');
    // Not scheduled: due when read, never sent to the outbox for the router's lag.
    expect(
      routeRecord({ ...record(envelope({ partition: '!o' })), timestamp: String(NOW - 59_500) }, contract, {
        now: NOW,
        horizonMs: HORIZON,
      }).kind,
    ).toBe('queue');
  });

  it('treats a past schedule as due now', () => {
    expect(
      routeRecord(record(envelope({ scheduled: '2020-01-01T00:00:00Z' })), contract, {
        now: NOW,
        horizonMs: HORIZON,
      }).kind,
    ).toBe('queue');
  });

  it('answers bad JSON, an empty record and schema errors as invalid, keeping a readable requestId', () => {
    expect(routeRecord(record('{nope'), contract, { now: NOW, horizonMs: HORIZON })).toMatchObject({
      kind: 'invalid',
      result: {
        response: { status: 400 },
        meta: {
          error: {
            code: 'invalid_request',
            message: expect.stringMatching(/^invalid JSON/),
            source: { offset: '42' },
          },
        },
      },
    });
    expect(
      routeRecord({ ...record(''), value: null }, contract, { now: NOW, horizonMs: HORIZON }),
    ).toMatchObject({
      kind: 'invalid',
    });
    const bad = routeRecord(
      record({ request: { uri: 'ftp://x' }, meta: { requestId: 'r-9', retry: { max: 0 } } }),
      contract,
      { now: NOW, horizonMs: HORIZON },
    );
    expect(bad).toMatchObject({
      kind: 'invalid',
      result: { meta: { requestId: 'r-9', error: { source: { partition: 3 } } } },
    });
    if (bad.kind === 'invalid') {
      expect(bad.result.meta.error?.message).toMatch(/request\.uri/);
      expect(bad.result.meta.error?.message).toMatch(/meta\.retry\.max/);
    }
  });

  it('answers a record that is not valid UTF-8 as invalid, as HTTP does, never calling with U+FFFD', () => {
    // FF FE C3 28 in place of BAD: no UTF-8 sequence (a lenient decoder makes it EF BF BD x3 + 28)
    const bytes = (value: unknown) => {
      const [before, after] = JSON.stringify(value).split('BAD') as [string, string];
      return Buffer.concat([Buffer.from(before), Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from(after)]);
    };
    const options = { now: NOW, horizonMs: HORIZON };
    const badBody = {
      ...envelope({ proxyData: { tenant: 't1' } }),
      request: { uri: 'https://a.example/', body: 'BAD' },
    };
    expect(routeRecord({ ...record(''), value: bytes(badBody) }, contract, options)).toMatchObject({
      kind: 'invalid',
      result: {
        response: { status: 400 },
        meta: {
          requestId: 'r-1',
          proxyData: { tenant: 't1' },
          error: {
            code: 'invalid_request',
            message: expect.stringMatching(/not valid UTF-8/),
            source: { offset: '42' },
          },
        },
      },
    });
    // What cannot be read intact is not echoed: neither a proxyData nor a requestId with bad bytes.
    const badMeta = envelope({ requestId: 'r-BAD', proxyData: { note: 'BAD' } });
    const damaged = routeRecord({ ...record(''), value: bytes(badMeta) }, contract, options);
    expect(damaged).toMatchObject({
      kind: 'invalid',
      result: { meta: { error: { code: 'invalid_request' } } },
    });
    if (damaged.kind === 'invalid') {
      expect(damaged.result.meta.proxyData).toBe(undefined);
      expect(damaged.result.meta.requestId).toBe(undefined);
    }
  });

  // Each of these was accepted, then refused by the queue (or the executor) on every attempt.
  it.each([
    ['a scheduled instant before 1970', { scheduled: '0000-01-01T00:00:00Z' }, 'meta.scheduled'],
    [
      'a scheduled instant a minute before 1970',
      { scheduled: '1970-01-01T00:00:00+00:01' },
      'meta.scheduled',
    ],
    ['a limiter window under 1 ms', limiterWith('999us'), 'meta.limiter.rates.0.duration'],
    ['a limiter window of 1 ns', limiterWith('1ns'), 'meta.limiter.rates.0.duration'],
  ])('answers %s as invalid, naming the field', (_, meta, field) => {
    const route = routeRecord(record(envelope(meta)), contract, { now: NOW, horizonMs: HORIZON });
    expect(route).toMatchObject({ kind: 'invalid', result: { meta: { requestId: 'r-1' } } });
    if (route.kind === 'invalid') expect(route.result.meta.error?.message).toContain(`${field}: `);
  });

  it('answers a producer-set tryCount that leaves no attempt as invalid instead of making a call', () => {
    const route = routeRecord(record(envelope({ retry: { max: 3 } }, { tryCount: 1000 })), contract, {
      now: NOW,
      horizonMs: HORIZON,
    });
    expect(route).toMatchObject({
      kind: 'invalid',
      result: { meta: { error: { code: 'invalid_request' } } },
    });
    if (route.kind === 'invalid')
      expect(route.result.meta.error?.message).toMatch(/^tryCount: leaves no attempt/);
  });

  it('answers deeply nested JSON anywhere in the record as invalid, without overflowing the stack', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const valid = JSON.stringify(envelope());
    for (const text of [
      deep,
      valid.replace('"meta":{', `"meta":{"proxyData":${deep},`),
      valid.replace('"meta":{', `"meta":{"x":${deep},`),
      valid.replace('"request":{', `"request":{"headers":${deep},`),
      valid.replace(/}$/, `,"extra":${deep}}`),
    ]) {
      const route = routeRecord(record(text), contract, { now: NOW, horizonMs: HORIZON });
      expect(route.kind).toBe('invalid');
      if (route.kind === 'invalid') {
        expect(() => JSON.stringify(route.result)).not.toThrow();
        expect(JSON.stringify(route.result).length).toBeLessThan(2_000);
      }
    }
    const proxied = routeRecord(record(valid.replace('"meta":{', `"meta":{"proxyData":${deep},`)), contract, {
      now: NOW,
      horizonMs: HORIZON,
    });
    if (proxied.kind === 'invalid')
      expect(proxied.result.meta.error?.message).toMatch(
        /meta\.proxyData: nests objects\/arrays deeper than the limit of 64 levels/,
      );
  });
});

describe('fenceRoute', () => {
  const ordered = (requestId: string, scheduled?: number, offset = '42') =>
    record(
      envelope({
        requestId,
        partition: '!p',
        ...(scheduled ? { scheduled: new Date(scheduled).toISOString() } : {}),
      }),
      offset,
    );
  const routed = (source: SourceRecord, stagedDueAt?: number) =>
    routeRecord(source, contract, { now: NOW, horizonMs: HORIZON, ...(stagedDueAt ? { stagedDueAt } : {}) });

  it('fences a partition with the record it sends to the outbox, due no earlier than the fence', () => {
    const far = ordered('a', NOW + 60_000);
    const first = fenceRoute(far, routed(far), undefined, false);
    expect(first.fence).toEqual({ dueAt: NOW + 60_000, last: 'a:0' });
    const earlier = ordered('b', NOW + 30_000, '43');
    const second = fenceRoute(earlier, routed(earlier), first.fence, false);
    if (second.route.kind !== 'outbox') throw new Error(second.route.kind);
    // b arrived after a: it waits for a's instant, and is the fence's last now.
    expect(second.route.row.dueAt.getTime()).toBe(NOW + 60_000);
    expect(second.fence).toEqual({ dueAt: NOW + 60_000, last: 'b:0' });
  });

  it('sends a record the queue would take to the outbox while its partition is fenced, with its span', () => {
    const fence: Fence = { dueAt: NOW + 500, last: 'a:0' };
    const near = ordered('b');
    const trace = () => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const queued = routeRecord(near, contract, { now: NOW, horizonMs: HORIZON, trace });
    const { route, fence: after } = fenceRoute(near, queued, fence, false);
    if (route.kind !== 'outbox') throw new Error(route.kind);
    expect(route.row).toMatchObject({ taskId: 'b:0', requestId: 'b', key: 'k', dueAt: new Date(NOW + 500) });
    expect(JSON.parse(route.row.payload.toString()).meta.traceparent).toBe(trace());
    expect(after).toEqual({ dueAt: NOW + 500, last: 'b:0' });
    // Unfenced, it is queued as routed.
    expect(fenceRoute(near, queued, undefined, false)).toEqual({ route: queued, fence: undefined });
  });

  it('lifts the fence with the relayed copy of its last record, queues every relayed copy, and fences none', () => {
    const fence: Fence = { dueAt: NOW + 60_000, last: 'b:0' };
    const a = ordered('a', NOW + 60_000);
    const relayedA = routed(a, NOW + 60_000);
    expect(fenceRoute(a, relayedA, fence, true)).toEqual({ route: relayedA, fence });
    const b = ordered('b', undefined, '43');
    const relayedB = routed(b, NOW + 60_000);
    expect(fenceRoute(b, relayedB, fence, true)).toEqual({ route: relayedB, fence: undefined });
  });

  it('leaves unordered partitions and invalid records alone', () => {
    const fence: Fence = { dueAt: NOW + 60_000, last: 'a:0' };
    const plain = record(envelope({ requestId: 'u', partition: 'p' }));
    expect(fenceRoute(plain, routed(plain), fence, false)).toEqual({ route: routed(plain), fence });
    const farPlain = record(envelope({ requestId: 'v', scheduled: new Date(NOW + 60_000).toISOString() }));
    expect(fenceRoute(farPlain, routed(farPlain), undefined, false).fence).toBeUndefined();
    const junk = record('not json');
    expect(fenceRoute(junk, routed(junk), fence, false)).toEqual({ route: routed(junk), fence });
  });
});

function limiterWith(duration: string) {
  return { limiter: { key: 'k', algorithm: 'token-bucket', rates: [{ duration, value: 1 }] } };
}

describe('routeRecord: meta.deadline of a record written straight to in', () => {
  const stamped = (offset: string, value: unknown, timestamp: number) => ({
    ...record(value, offset),
    timestamp: String(timestamp),
  });

  it("counts a duration from the record's timestamp and carries the instant in the task", () => {
    const arrived = NOW - 5_000; // a router behind `in` does not lengthen the deadline
    const route = routeRecord(stamped('1', envelope({ deadline: '30s' }), arrived), contract, {
      now: NOW,
      horizonMs: HORIZON,
      inlineMaxBytes: 10_000,
    });
    if (route.kind !== 'queue') throw new Error(route.kind);
    const task = decodeQueuedTask(route.task.payload);
    expect(task.deadlineAt).toBe(arrived + 30_000);
    expect((task.inline?.value as { meta: { deadline: string } } | undefined)?.meta.deadline).toBe(
      new Date(arrived + 30_000).toISOString(),
    );
  });

  it('writes the instant into the outbox copy, so the relayed record keeps the same deadline', () => {
    const meta = { deadline: '2h', scheduled: '2026-12-01T10:00:00Z' };
    const route = routeRecord(stamped('2', envelope(meta), NOW), contract, { now: NOW, horizonMs: HORIZON });
    if (route.kind !== 'outbox') throw new Error(route.kind);
    const copy = JSON.parse(route.row.payload.toString('utf8')) as { meta: { deadline: string } };
    expect(copy.meta.deadline).toBe('2026-12-01T11:00:00.000Z');
    const later = NOW + 3_600_000;
    const relayed = routeRecord(stamped('3', copy, later), contract, {
      now: later,
      horizonMs: HORIZON,
      stagedDueAt: later,
    });
    if (relayed.kind !== 'queue') throw new Error(relayed.kind);
    expect(decodeQueuedTask(relayed.task.payload).deadlineAt).toBe(NOW + 7_200_000);
  });

  it('answers a deadline past at arrival, or before scheduled, with an invalid_request result', () => {
    const cases = [
      [{ deadline: '2026-12-01T08:59:00Z' }, 'meta.deadline'],
      [{ deadline: '1m', scheduled: '2026-12-01T09:05:00Z' }, 'meta.scheduled'],
    ] as const;
    for (const [meta, path] of cases) {
      const route = routeRecord(stamped('4', envelope(meta), NOW), contract, {
        now: NOW,
        horizonMs: HORIZON,
      });
      if (route.kind !== 'invalid') throw new Error(route.kind);
      expect(route.result.meta.requestId).toBe('r-1');
      expect(route.result.meta.error).toMatchObject({
        code: 'invalid_request',
        issues: [{ path }],
        source: { topic: 'in', partition: 3, offset: '4' },
      });
    }
  });

  it('does not refuse a deadline that passed after acceptance (createdAt): that task expires downstream', () => {
    const created = '2026-12-01T08:00:00Z';
    const value = envelope({ deadline: '2026-12-01T08:30:00Z' }, { createdAt: created });
    const route = routeRecord(stamped('5', value, NOW), contract, { now: NOW, horizonMs: HORIZON });
    if (route.kind !== 'queue') throw new Error(route.kind);
    expect(decodeQueuedTask(route.task.payload).deadlineAt).toBe(Date.parse('2026-12-01T08:30:00Z'));
  });

  it('does not refuse a passed deadline on a record Requester signed (a DLQ replay): that task expires downstream', () => {
    const replayed = envelope(
      { deadline: '2026-12-01T08:30:00Z' },
      { createdAt: '2026-12-01T09:00:00Z', tryCount: 1, retryBase: 1 },
    );
    const options = { now: NOW, horizonMs: HORIZON };
    expect(routeRecord(stamped('6', replayed, NOW), contract, options).kind).toBe('invalid');
    const route = routeRecord(stamped('7', replayed, NOW), contract, { ...options, signed: () => true });
    if (route.kind !== 'queue') throw new Error(route.kind);
    expect(decodeQueuedTask(route.task.payload).deadlineAt).toBe(Date.parse('2026-12-01T08:30:00Z'));
  });

  it('gives a record without a deadline the default one, from its arrival or its scheduled instant', () => {
    const options = { now: NOW, horizonMs: HORIZON, inlineMaxBytes: 10_000, defaultDeadlines: ['1h', '30s'] };
    const route = routeRecord(stamped('8', envelope({}), NOW - 1_000), contract, options);
    if (route.kind !== 'queue') throw new Error(route.kind);
    expect(decodeQueuedTask(route.task.payload).deadlineAt).toBe(NOW - 1_000 + 30_000);
    expect(route.envelope.meta.deadline).toBe(new Date(NOW - 1_000 + 30_000).toISOString());
    const scheduled = envelope({ scheduled: '2026-12-01T11:00:00Z' });
    const later = routeRecord(stamped('9', scheduled, NOW), contract, options);
    if (later.kind !== 'outbox') throw new Error(later.kind);
    const copy = JSON.parse(later.row.payload.toString('utf8')) as { meta: { deadline: string } };
    expect(copy.meta.deadline).toBe('2026-12-01T11:00:30.000Z');
    // A deadline of its own wins, later or not.
    const own = routeRecord(stamped('10', envelope({ deadline: '2h' }), NOW), contract, options);
    if (own.kind !== 'queue') throw new Error(own.kind);
    expect(decodeQueuedTask(own.task.payload).deadlineAt).toBe(NOW + 7_200_000);
  });
});

describe('debounceRoute', () => {
  const debounce = { key: 'profile', delay: '2s' };
  const routed = (extra: Record<string, unknown> = {}) =>
    routeRecord(record(envelope({ debounce }, extra)), contract, { now: NOW, horizonMs: HORIZON });

  it('enters a request as its producer sent it, never a copy coming back', () => {
    expect(entersDebounce(routed(), false)).toBe(true);
    // A relay's copy, a task rescheduled with attempts made or time waited: in its burst already.
    expect(entersDebounce(routed(), true)).toBe(false);
    expect(
      entersDebounce(routed({ tryCount: 1, meta: { requestId: 'r-1', debounce, retry: { max: 3 } } }), false),
    ).toBe(false);
    expect(entersDebounce(routed({ waitTime: 5_000_000 }), false)).toBe(false);
    const plain = routeRecord(record(envelope()), contract, { now: NOW, horizonMs: HORIZON });
    expect(entersDebounce(plain, false)).toBe(false);
  });

  it('queues a burst due within the horizon for its due time', () => {
    const route = routed();
    if (route.kind !== 'queue') throw new Error(route.kind);
    const due = debounceRoute(record(envelope({ debounce })), route, NOW + HORIZON, {
      now: NOW,
      horizonMs: HORIZON,
    });
    expect(due.kind).toBe('queue');
    if (due.kind === 'queue') expect(due.task).toMatchObject({ id: route.task.id, dueAt: NOW + HORIZON });
  });

  it('sends a burst due beyond the horizon to the outbox, due then (its relayed copy does not enter again)', () => {
    const route = routed();
    if (route.kind !== 'queue') throw new Error(route.kind);
    const source = record(envelope({ debounce }));
    const later = debounceRoute(source, route, NOW + 2_000, { now: NOW, horizonMs: HORIZON });
    expect(later.kind).toBe('outbox');
    if (later.kind !== 'outbox') return;
    expect(later.row).toMatchObject({
      taskId: route.task.id,
      requestId: 'r-1',
      dueAt: new Date(NOW + 2_000),
    });
    expect(JSON.parse(later.row.payload.toString()).meta.debounce).toEqual(debounce);
  });
});
