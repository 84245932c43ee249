import { RateLimiter } from '@requester/policies';
import { QueueAdmin } from '@requester/queue';
import {
  attemptBudget,
  createRequestContract,
  decodeQueuedTask,
  LIMITER_ALGORITHMS,
  MAX_CONCURRENCY_LIMIT,
  MAX_INSTANT_MS,
  MAX_JSON_DEPTH,
  MAX_TRY_COUNT,
  parseRfc3339,
  type RequestEnvelope,
  resolveDeadline,
} from '@requester/shared';
import { Debounces } from '@requester/shared/debounce';
import {
  capturingLogger,
  deadlineText,
  goDurationText,
  instantText,
  rfc3339At,
  silentLogger,
  uniqueName,
} from '@requester/shared/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResponseCache } from '../../../executor/src/cache/index.ts';
import { KeyConcurrency } from '../../../executor/src/concurrency/index.ts';
import { ExecutorHarness } from '../../../executor/src/worker/harness.fixture.ts';
import { createApi } from '../../../ingress/src/api/index.ts';
import { openAccess } from '../../../ingress/src/auth/index.ts';
import { debounceBatch } from '../../../scheduler/src/router/debouncing.ts';
import { routeRecord, type SourceRecord } from '../../../scheduler/src/router/route.ts';

/**
 * One truth for validity, checked on generated envelopes whose fields sit on the edges of the
 * contract (extreme durations and multipliers, instants before 1970 and past 9999, attempt
 * counters, limiter windows and costs, start-by deadlines, priorities, concurrency keys, debounce
 * keys, deep or large proxyData, odd URIs, methods and headers):
 *
 * - every envelope the schema refuses, or whose deadline the door refuses (not after acceptance,
 *   or before `scheduled`: resolveDeadline), is answered 400 by the HTTP API and as an `invalid`
 *   route (an `invalid_request` result) by the router;
 * - every envelope it accepts is answered 202 by the HTTP API, and on the Kafka path — the real
 *   routing function (a debounced record put off to its burst's end as the router does), the real
 *   FairQueue on Redis, the real executor (limiter, cache, concurrency keys and debounce keys on
 *   Redis) against a local target — ends in exactly one result, never an internal error, `expired` only
 *   once its deadline has passed; one due beyond the horizon goes to the outbox with a due time
 *   PostgreSQL and Date hold.
 */

const HORIZON_MS = 1_000;
/**
 * Liveness bound of one run: its retries (at most 4 × 60 ms) end far sooner, but the first result
 * also waits for the collector to join its consumer group. A missing result fails the run.
 */
const RESULT_BOUND_MS = 30_000;
const contract = createRequestContract();
const now = Date.now();

/** A JSON text for an envelope; `deep` marks where `n` nested arrays go (JSON.stringify would overflow). */
type Spec = { envelope: Record<string, unknown>; deep?: number };

function jsonOf(spec: Spec): string {
  const text = JSON.stringify(spec.envelope);
  if (spec.deep === undefined) return text;
  return text.replace('"__deep__"', `${'['.repeat(spec.deep)}${']'.repeat(spec.deep)}`);
}

const sometimes = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 2 });
/**
 * Usual values mostly, edge cases (accepted or not) now and then: with a dozen fields each one
 * rarely on its edge, both sides of the schema are explored, and a refusal has one or two causes.
 */
const mostly = <T>(usual: fc.Arbitrary<T>, edges: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 10, arbitrary: usual }, { weight: 1, arbitrary: edges });
const MS = 1_000_000n;

/** Drops the undefined fields, so an absent option is absent from the JSON too. */
function defined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}

interface Shape {
  /** Target URIs only (and wake-ups), short retries, limits that never hold a call back. */
  runnable: boolean;
  targetUrl: string;
}

function methodArb(runnable: boolean) {
  const valid = fc.constantFrom(
    'GET',
    'POST',
    'PUT',
    'PATCH',
    'DELETE',
    'HEAD',
    'OPTIONS',
    'X-CUSTOM',
    "M!#$%&'*+.^_`|~",
  );
  return runnable
    ? valid
    : mostly(valid, fc.constantFrom('get', 'CONNECT', 'TRACE', '', 'G ET', 'X'.repeat(33)));
}

function uriArb({ runnable, targetUrl }: Shape, requestId: string) {
  const status = fc.constantFrom(200, 204, 404, 429, 500, 503);
  const odd = fc.constantFrom(
    '',
    '/%20',
    "/a'b",
    '/\u00e9t\u00e9',
    '/x;y=z',
    '#fragment',
    '?q=%ZZ',
    '/../up',
  );
  const target = fc
    .tuple(status, odd)
    .map(([code, tail]) => `${targetUrl}/status/${code}/${tail}?id=${encodeURIComponent(requestId)}`);
  const wakeUp = fc.constant('');
  if (runnable) return fc.oneof({ weight: 4, arbitrary: target }, wakeUp);
  const invalid = fc.constantFrom(
    'ftp://x.example/',
    'http:/x.example',
    'http://',
    'mailto:a@b',
    'http://a b/',
    `http://x.example/${'a'.repeat(9_000)}`,
    'HTTP://X.EXAMPLE/ok',
  );
  return mostly(fc.oneof(target, wakeUp), invalid);
}

function headersArb(runnable: boolean) {
  const usualName = fc.oneof(
    fc.constantFrom(
      'content-type',
      'x-a',
      'X-A',
      'host',
      'expect',
      'te',
      'idempotency-key',
      'traceparent',
      'accept-encoding',
    ),
    fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/),
  );
  const usualValue = fc.oneof(
    fc.stringMatching(/^[\t\x20-\x7e]{0,20}$/),
    fc.constantFrom('', ' padded ', '\t', '\u00e9\u00ff', '100-continue'),
  );
  const name = runnable
    ? usualName
    : mostly(usualName, fc.constantFrom('connection', 'Content-Length', 'x y', '', 'x-\u00e9'));
  const value = runnable
    ? usualValue
    : mostly(usualValue, fc.constantFrom('a\r\nb', '\u0100', '\0', 'x'.repeat(70_000)));
  return fc.dictionary(name, value, { maxKeys: 4 });
}

function retryArb(runnable: boolean) {
  const usualMultiplier = fc.oneof(
    fc.constantFrom(1, 2, 1e308, Number.MAX_VALUE),
    fc.double({ min: 1, noNaN: true, noDefaultInfinity: true }),
  );
  const usualJitter = fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true }));
  const multiplier = runnable ? usualMultiplier : mostly(usualMultiplier, fc.constantFrom(0, 0.5, -1));
  const jitter = runnable ? usualJitter : mostly(usualJitter, fc.constantFrom(-0.1, 1.1));
  // Runnable: pauses of at most 60 ms (within the horizon), whatever the multiplier.
  const delay = runnable
    ? goDurationText(0n, 30n * MS)
    : mostly(goDurationText(0n, 30n * MS), goDurationText());
  const maxDelay = runnable
    ? goDurationText(30n * MS, 60n * MS)
    : mostly(goDurationText(30n * MS, 60n * MS), goDurationText());
  const max = runnable
    ? fc.integer({ min: 1, max: 4 })
    : mostly(fc.integer({ min: 1, max: 100 }), fc.constantFrom(0, 101, 1.5));
  // Runnable: maxDelay always given, or the default (5m) would park a retry past the test's wait.
  const requiredKeys: Array<'max' | 'maxDelay'> = runnable ? ['max', 'maxDelay'] : ['max'];
  return fc.record({ max, delay, maxDelay, multiplier, jitter }, { requiredKeys });
}

function limiterArb(runnable: boolean, key: string) {
  // Runnable: every window allows more units than any budget spends (4 attempts of cost 100), so
  // no attempt waits for years: a window of centuries would otherwise park a retry past the test.
  const value = runnable
    ? fc.integer({ min: 400, max: Number.MAX_SAFE_INTEGER })
    : mostly(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), fc.constantFrom(0, -1, 1.5));
  // Runnable: a cost every window holds at once; else also above a window's value, or no integer.
  const usualCost = fc.integer({ min: 1, max: 100 });
  const cost = runnable
    ? usualCost
    : mostly(usualCost, fc.constantFrom(0, -1, 1.5, 101, Number.MAX_SAFE_INTEGER, 2 ** 53));
  return fc.record(
    {
      key: fc.constant(key),
      algorithm: fc.constantFrom(...LIMITER_ALGORITHMS),
      // Not runnable: now and then no window at all (refused unless a quota stands in).
      rates: fc.array(fc.record({ duration: mostly(goDurationText(MS), goDurationText()), value }), {
        minLength: runnable ? 1 : 0,
        maxLength: 3,
      }),
      cost,
      quota: quotaArb(runnable),
    },
    { requiredKeys: ['key', 'algorithm', 'rates'] },
  );
}

/** `meta.limiter.quota`: runnable, more units than any budget spends; else also a bad field now and then. */
function quotaArb(runnable: boolean): fc.Arbitrary<unknown> {
  const value = fc.integer({ min: 1_000, max: Number.MAX_SAFE_INTEGER });
  const timeZone = fc.constantFrom('UTC', 'Europe/Paris', 'Asia/Kolkata', 'America/Santiago');
  const calendar = fc.oneof(
    fc.record({ period: fc.constant('day') }),
    fc.record(
      { period: fc.constant('week'), resetDay: fc.integer({ min: 1, max: 7 }) },
      { requiredKeys: ['period'] },
    ),
    fc.record(
      { period: fc.constant('month'), resetDay: fc.integer({ min: 1, max: 31 }) },
      { requiredKeys: ['period'] },
    ),
  );
  const usual = fc
    .tuple(value, calendar, fc.option(timeZone, { nil: undefined }))
    .map(([v, c, zone]) => defined({ value: v, ...c, timeZone: zone }));
  if (runnable) return usual;
  const refused = fc.constantFrom<unknown>(
    { value: 0, period: 'day' },
    { value: 10, period: 'year' },
    { value: 10, period: 'month', resetDay: 32 },
    { value: 10, period: 'week', resetDay: 8 },
    { value: 10, period: 'day', resetDay: 2 },
    { value: 10, period: 'day', timeZone: 'Mars/Olympus' },
    { value: 1, period: 'day' }, // below most costs: refused as a cost it could never admit
    'monthly',
  );
  return mostly(usual, refused);
}

/** `meta.priority`: -10..10; else also out of range or not an integer now and then. */
function priorityArb(runnable: boolean): fc.Arbitrary<unknown> {
  const usual = fc.integer({ min: -10, max: 10 });
  if (runnable) return usual;
  return mostly<unknown>(usual, fc.constantFrom<unknown>(11, -11, 1.5, '5', null));
}

/** `meta.concurrency`: a key of its own (never held by another request) and a limit; edges now and then. */
function concurrencyArb(runnable: boolean, key: string): fc.Arbitrary<unknown> {
  const limit = fc.integer({ min: 1, max: MAX_CONCURRENCY_LIMIT });
  const usual = limit.map((l) => ({ key, limit: l }));
  if (runnable) return usual;
  return mostly<unknown>(
    usual,
    fc.constantFrom<unknown>(
      { key, limit: 0 },
      { key, limit: MAX_CONCURRENCY_LIMIT + 1 },
      { key, limit: 1.5 },
      { key: '', limit: 1 },
      { key: 'k'.repeat(201), limit: 1 },
      { key: 'caf\u00e9', limit: 1 },
      { limit: 1 },
    ),
  );
}

/**
 * `meta.debounce`: a key of its own (its request is its burst's only one, so it runs), a delay
 * within the test's wait and a maxWait at least as long; edges now and then.
 */
function debounceArb(runnable: boolean, key: string): fc.Arbitrary<unknown> {
  const usual = fc
    .tuple(goDurationText(MS, 30n * MS), fc.option(goDurationText(30n * MS, 60n * MS), { nil: undefined }))
    .map(([delay, maxWait]) => defined({ key, delay, maxWait }));
  if (runnable) return usual;
  return mostly<unknown>(
    usual,
    fc.constantFrom<unknown>(
      { key, delay: '0s' },
      { key, delay: '2h' },
      { key, delay: '10ms', maxWait: '5ms' },
      { key, delay: '10ms', maxWait: '2h' },
      { key: '', delay: '10ms' },
      { key: 'k'.repeat(201), delay: '10ms' },
      { key, delay: 10 },
    ),
  );
}

/** The flow-control blocks the Kafka-path property must see carried out end to end. */
const FLOW_CONTROL = ['priority', 'concurrency', 'debounce', 'deadline'] as const;
type FlowControl = (typeof FLOW_CONTROL)[number];

const hasBlock = (meta: Record<string, unknown>, block: FlowControl) =>
  meta[block] !== undefined && (block !== 'priority' || meta.priority !== 0);

/**
 * A runnable envelope of the generator's with `block` and due now (queued, not outboxed): an
 * example the property runs first, so that its check of each block never rests on chance.
 */
function runnableWith(block: FlowControl, targetUrl: string): Spec {
  const due = (spec: Spec) => {
    const parsed = contract.safeParse(JSON.parse(jsonOf(spec)));
    return (
      parsed.ok &&
      hasBlock(parsed.value.meta as Record<string, unknown>, block) &&
      parsed.value.meta.scheduled === undefined &&
      deadlineAccepted(parsed.value, 'router', Date.now())
    );
  };
  const [spec] = fc.sample(envelopeArb({ runnable: true, targetUrl }).filter(due), 1);
  if (!spec) throw new Error(`no runnable envelope with meta.${block}`);
  return spec;
}

/** Present now and then: a meta block rarer than `sometimes`, so that runs still hold the others alone. */
const rarely = <T>(arb: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

/** `meta.deadline`: far from now or a duration (deadlineText), and now and then no deadline text at all. */
function deadlineArb(runnable: boolean): fc.Arbitrary<unknown> {
  const usual = deadlineText(now);
  if (runnable) return usual;
  const refused = fc.constantFrom<unknown>(
    'soon',
    '-5s',
    '0',
    '',
    '2026-13-01T00:00:00Z',
    '2026-12-01T09:00:00',
    5,
  );
  return mostly<unknown>(usual, refused);
}

/**
 * Whether the door accepts the envelope's deadline: the HTTP API at `acceptedAt` (it ignores a
 * caller's `createdAt`), the router at the record's `createdAt`, else its own clock.
 */
function deadlineAccepted(envelope: RequestEnvelope, door: 'http' | 'router', acceptedAt: number): boolean {
  const at = door === 'router' && envelope.createdAt ? parseRfc3339(envelope.createdAt) : acceptedAt;
  return resolveDeadline(envelope.meta, at).ok;
}

function countersArb() {
  const count = fc.oneof(
    fc.integer({ min: 0, max: 5 }),
    fc.constantFrom(1000, MAX_TRY_COUNT, MAX_TRY_COUNT + 1, -1),
  );
  const edges = fc.oneof(
    count.map((tryCount) => ({ tryCount })),
    fc.tuple(count, count).map(([tryCount, retryBase]) => ({ tryCount, retryBase })),
  );
  // A replayed request: every attempt before the replay is outside its budget.
  const replayed = fc
    .oneof(fc.integer({ min: 0, max: 1000 }), fc.constant(MAX_TRY_COUNT))
    .map((n) => ({ tryCount: n, retryBase: n }));
  return mostly(fc.oneof(fc.constant({}), replayed), edges);
}

/** proxyData as a value, or `deep` levels of arrays put in the JSON text (`__deep__`). */
function proxyDataArb(): fc.Arbitrary<{ value: unknown; deep?: number }> {
  return mostly(
    fc.jsonValue({ maxDepth: 3 }).map((value) => ({ value })),
    fc.oneof(
      fc
        .constantFrom(MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 5_000, 100_000)
        .map((deep) => ({ value: '__deep__', deep })),
      fc.constantFrom(1_000, 70_000).map((length) => ({ value: 'p'.repeat(length) })),
    ),
  );
}

/** Instants from 1970 to 9999 (past ones run now), or the edges on both sides of that range. */
function scheduledArb(): fc.Arbitrary<string> {
  const usual = fc.oneof(
    fc.integer({ min: 0, max: now }),
    fc.constantFrom(0, now, MAX_INSTANT_MS),
    fc.integer({ min: now, max: MAX_INSTANT_MS }),
  );
  const offset = fc.integer({ min: -1439, max: 1439 });
  const inRange = fc
    .tuple(usual, offset)
    .map(([ms, minutes]) => rfc3339At(ms, minutes))
    .filter((text) => {
      const ms = Date.parse(text);
      return ms >= 0 && ms <= MAX_INSTANT_MS && /^\d{4}-/.test(text);
    });
  return mostly(inRange, instantText(now));
}

let sequence = 0;

function envelopeArb(shape: Shape): fc.Arbitrary<Spec> {
  const run = uniqueName('v');
  return fc.constant(null).chain(() => {
    const requestId = `${run}-${sequence++}`;
    const { runnable } = shape;
    const meta = fc.record({
      requestId: runnable
        ? fc.constant(requestId)
        : mostly(fc.constant(requestId), fc.constantFrom('', 'a b', 'x'.repeat(257))),
      partition: sometimes(
        runnable
          ? fc.constantFrom(`!${run}`, run)
          : mostly(fc.constantFrom(`!${run}`, run), fc.constantFrom('!', '')),
      ),
      sync: sometimes(fc.boolean()),
      scheduled: sometimes(scheduledArb()),
      deadline: sometimes(deadlineArb(runnable)),
      proxyData: sometimes(proxyDataArb()),
      limiter: sometimes(limiterArb(runnable, `${requestId}-lim`)),
      retry: sometimes(retryArb(runnable)),
      cache: sometimes(
        fc.record({
          key: fc.constant(`${requestId}-cache`),
          ttl: mostly(goDurationText(1n), goDurationText()),
        }),
      ),
      signing: sometimes(fc.constant({ keyId: 'no-such-key' })),
      priority: sometimes(priorityArb(runnable)),
      concurrency: rarely(concurrencyArb(runnable, `${requestId}-conc`)),
      // Refused with an ordered partition or meta.scheduled (the schema says which).
      debounce: rarely(debounceArb(runnable, `${requestId}-deb`)),
    });
    const request = fc.record({
      uri: uriArb(shape, requestId),
      method: sometimes(methodArb(runnable)),
      body: sometimes(mostly(fc.string({ maxLength: 50 }), fc.constant('b'.repeat(1_100_000)))),
      headers: sometimes(headersArb(runnable)),
    });
    const extra = fc.record({
      createdAt: sometimes(mostly(scheduledArb(), instantText(now, true))),
      waitTime: sometimes(
        mostly(fc.constantFrom(0, 1_000_000_000, Number.MAX_SAFE_INTEGER), fc.constantFrom(-1, 1.5)),
      ),
    });
    return fc.tuple(request, meta, countersArb(), extra).map(([req, m, counters, more]) => {
      const { proxyData, ...rest } = m;
      const body = runnable && req.body && req.body.length > 1_000 ? undefined : req.body;
      return {
        envelope: defined({
          request: defined({ ...req, body }),
          meta: defined({ ...rest, proxyData: proxyData?.value }),
          ...counters,
          ...defined(more),
        }),
        ...(proxyData?.deep === undefined ? {} : { deep: proxyData.deep }),
      };
    });
  });
}

function sourceRecord(text: string, offset = '0'): SourceRecord {
  return { topic: 'in', partition: 0, offset, key: null, value: Buffer.from(text) };
}

const api = createApi(
  { submit: async () => {} },
  // Validity, not access control: every caller may ask anything here (auth/ covers the keys).
  { maxBodyBytes: 8 << 20, syncTimeoutMs: 10, longPollMaxMs: 10, access: openAccess() },
  silentLogger,
);

async function httpStatus(text: string): Promise<number> {
  const res = await api.request('/request', {
    method: 'POST',
    body: text,
    headers: { 'content-type': 'application/json' },
  });
  await res.arrayBuffer();
  return res.status;
}

function resultWithin(h: ExecutorHarness, requestId: string, ms: number) {
  let timer: NodeJS.Timeout | undefined;
  const missing = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no result for ${requestId} within ${ms} ms`)), ms);
  });
  return Promise.race([h.resultOf(requestId), missing]).finally(() => clearTimeout(timer));
}

describe('validity: the schema is the one truth for the HTTP API, the router and the executor', () => {
  it('a refused envelope gets a 400 and an invalid_request result; an accepted one a 202 and a route', async () => {
    let refused = 0;
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(envelopeArb({ runnable: false, targetUrl: 'http://127.0.0.1:9' }), async (spec) => {
        const text = jsonOf(spec);
        const parsed = contract.safeParse(JSON.parse(text));
        const route = routeRecord(sourceRecord(text), contract, { now, horizonMs: HORIZON_MS });
        const status = await httpStatus(text);
        if (parsed.ok) {
          accepted++;
          // The deadline is judged at each door's acceptance: a caller's createdAt anchors only the router.
          expect(status).toBe(deadlineAccepted(parsed.value, 'http', Date.now()) ? 202 : 400);
          const routed = deadlineAccepted(parsed.value, 'router', now);
          expect(route.kind === 'invalid').toBe(!routed);
          if (!routed)
            expect(route).toMatchObject({ result: { meta: { error: { code: 'invalid_request' } } } });
        } else {
          refused++;
          expect(status).toBe(400);
          expect(route).toMatchObject({
            kind: 'invalid',
            result: { meta: { error: { code: 'invalid_request' } } },
          });
        }
      }),
      { numRuns: 400 },
    );
    // Both sides were explored (the arbitraries aim at the boundary).
    expect(refused).toBeGreaterThan(40);
    expect(accepted).toBeGreaterThan(40);
  });

  describe('on the Kafka path', () => {
    const h = new ExecutorHarness();
    const errors = capturingLogger('error');
    let queue: ReturnType<ExecutorHarness['newQueue']>;
    let limiter: RateLimiter;
    let debounces: Debounces;

    beforeAll(async () => {
      await h.open();
      limiter = new RateLimiter({ redis: h.redis, prefix: h.prefix('lim') });
      const cache = new ResponseCache({ redis: h.redis, prefix: h.prefix('cache'), logger: silentLogger });
      h.onClose(() => cache.close());
      debounces = new Debounces(h.redis, h.prefix('debounce'));
      const concurrency = new KeyConcurrency({ redis: h.redis, prefix: h.prefix('conc'), leaseMs: 30_000 });
      ({ queue } = h.startExecutor({
        limiter,
        cache,
        debounces,
        concurrency,
        logger: errors.logger,
        maxWorkers: 16,
      }));
    }, 60_000);
    afterAll(() => h.close(), 60_000);

    it('an accepted envelope ends in exactly one result (or the outbox, when due later), never an internal error', async () => {
      const awaited: Array<{ envelope: RequestEnvelope }> = [];
      let outboxed = 0;
      await fc.assert(
        fc.asyncProperty(
          envelopeArb({ runnable: true, targetUrl: h.target.url }),
          fc.boolean(),
          async (spec, inline) => {
            const text = jsonOf(spec);
            const parsed = contract.safeParse(JSON.parse(text));
            if (!parsed.ok) return; // the refusal property covers these
            const envelope = parsed.value;
            const [meta] = await h.producer.send(h.inTopic, [{ partition: 0, value: text }]);
            const record = { ...sourceRecord(text, String(meta?.baseOffset ?? '0')), topic: h.inTopic };
            // Read back from Kafka, or carried inline in the task: both must end alike.
            const inlineMaxBytes = inline ? 1 << 20 : 0;
            const routedAt = Date.now();
            const routed = [
              {
                record,
                route: routeRecord(record, contract, {
                  now: routedAt,
                  horizonMs: HORIZON_MS,
                  inlineMaxBytes,
                }),
              },
            ];
            // A debounced one is put off to its burst's end, as the router does its batch.
            await debounceBatch(routed, debounces, routedAt, HORIZON_MS, () => false, errors.logger);
            const [{ route }] = routed as [(typeof routed)[0]];
            if (!deadlineAccepted(envelope, 'router', routedAt)) {
              expect(route.kind).toBe('invalid'); // refused at the door: the refusal property covers it
              return;
            }
            if (route.kind === 'outbox') {
              outboxed++;
              expect(route.row.dueAt.getTime()).toBeLessThanOrEqual(MAX_INSTANT_MS);
              expect(route.row.dueAt.toISOString()).toMatch(/^\d{4}-/);
              return;
            }
            expect(route.kind).toBe('queue');
            if (route.kind !== 'queue') return;
            // Its priority rides in the queue task as accepted (0: none).
            expect(route.task.priority ?? 0).toBe(envelope.meta.priority ?? 0);
            expect(await queue.publish([route.task])).toEqual(['queued']);
            const result = await resultWithin(h, envelope.meta.requestId, RESULT_BOUND_MS);
            awaited.push({ envelope });
            // Accepted means the later stages carry it out: none refuses it (only a signing key the
            // service lacks is a refusal the schema cannot know of).
            expect(result.meta.error?.code).not.toBe('internal');
            // Its debounce key is its own: the burst's only request runs, never replaced.
            expect(result.meta.error?.code).not.toBe('debounced');
            // Expired only once its deadline has passed: an accepted deadline never cuts a task short.
            if (result.meta.error?.code === 'expired') {
              const task = decodeQueuedTask(route.task.payload);
              expect(task.deadlineAt).toBeDefined();
              expect(task.deadlineAt).toBeLessThanOrEqual(Date.now());
            }
            if (result.meta.error?.code === 'invalid_request') expect(envelope.meta.signing).toBeDefined();
            expect(result.meta.tryCount - (envelope.retryBase ?? 0)).toBeLessThanOrEqual(
              attemptBudget(envelope),
            );
            const marker = `id=${encodeURIComponent(envelope.meta.requestId)}`;
            const calls = h.target.calls.filter((call) => call.path.endsWith(marker));
            expect(calls.length).toBeLessThanOrEqual(attemptBudget(envelope));
          },
        ),
        // No shrinking: each failing run may have waited RESULT_BOUND_MS; the counterexample is printed as is.
        // The examples come first: each flow-control block is carried out at least once, however
        // few random runs a slow box fits in the time limit.
        {
          numRuns: 100,
          interruptAfterTimeLimit: 45_000,
          endOnFailure: true,
          examples: FLOW_CONTROL.map(
            (block) => [runnableWith(block, h.target.url), false] as [Spec, boolean],
          ),
        },
      );
      // Settled: nothing left in the queue (the last ack follows its result), no second result for anyone.
      const admin = new QueueAdmin(queue);
      const settledBy = Date.now() + RESULT_BOUND_MS;
      let info = await admin.info();
      while (info.totals.pending + info.totals.inFlight > 0 && Date.now() < settledBy) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        info = await admin.info();
      }
      expect(info.totals).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
      for (const { envelope } of awaited) expect(h.results.get(envelope.meta.requestId)).toHaveLength(1);
      expect(errors.lines).toEqual([]);
      expect(awaited.length + outboxed).toBeGreaterThan(20);
      // Each flow-control block was carried out end to end in some run.
      for (const block of FLOW_CONTROL)
        expect(
          awaited.filter(({ envelope }) => hasBlock(envelope.meta, block)).length,
          block,
        ).toBeGreaterThan(0);
    }, 120_000);
  });
});
