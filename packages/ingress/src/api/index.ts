/**
 * The HTTP API shared by the ingress and sync-gateway roles:
 *
 * - `POST /request` (ingress): validate, stamp, write to `in`, answer `202 {requestId}`; with
 *   `meta.sync: true` and a Hub in this process, wait for the result and answer `200` + envelope.
 * - `GET /requests/:id?wait=30s` (sync-gateway): the result from the Hub, or `404 pending`.
 * - `DELETE /requests/:id` (ingress): cancels the caller's own request of that id (`202`).
 * - `GET /openapi.json`: the OpenAPI 3.1 document.
 *
 * Which roles run is read from `parts` on every request, so roles can attach to one server in any
 * order and a route of a role that does not run answers a 404 that says so.
 *
 * @module
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { type CancelOutcome, ownerActor } from '@requester/shared/cancel';
import {
  clientScoped,
  defaultDeadlineAt,
  kafkaKeyFor,
  type RequestEnvelope,
  resolveDeadline,
  safeParseRequestEnvelope,
  withDeadlineInstant,
  withDefaultDeadline,
} from '@requester/shared/contract';
import type { ErrorCode } from '@requester/shared/errors';
import {
  eventsOfClient,
  type Journal,
  type JournalEvent,
  type JournalLookup,
  lookupSince,
} from '@requester/shared/journal';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import { REPLY_TO_HEADER } from '@requester/shared/replies';
import { formatRfc3339, tryParseDuration } from '@requester/shared/time';
import {
  newTraceparent,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceparentOf,
} from '@requester/shared/tracing';
import { type Context, Hono } from 'hono';
import { type Access, authenticate, type Refusal } from '../auth/index.ts';
import { ByteBudget, isJsonMediaType, readJsonBody } from '../body/index.ts';
import { type ClaimRequestId, requestFingerprint } from '../claims/index.ts';
import type { CredentialNames, CredentialRefusal } from '../credentials/index.ts';
import type { DestinationDoor } from '../destinations/index.ts';
import { BodyBudgets, KeySlots, type Slot } from '../fair/index.ts';
import type { Hub } from '../hub/index.ts';
import { openApiDocument } from '../openapi/index.ts';
import { nodeRequest, requestHeader } from '../request/index.ts';
import type { Env } from './context.ts';
import { log, useLog } from './log/index.ts';
import { observe } from './metrics/index.ts';
import { correlated } from './request-id/index.ts';
import { serverSpan, traced } from './tracing/index.ts';

/** Writes one record (Kafka key, JSON text, service-set headers) to `in`. */
export type Submit = (key: string, value: string, headers?: Record<string, string>) => Promise<void>;

export interface ApiParts {
  /** Writes an accepted envelope to `in`; rejects unless Kafka acknowledged it (ingress role). */
  submit?: Submit;
  /** Claims a requestId for one request within the dedup window (ingress role; absent = no check). */
  claim?: ClaimRequestId;
  /**
   * Results from `out` or this gateway's reply channel (sync-gateway role), by result id: the
   * requestId in its client's namespace (`clientScoped`, see results/resultIdOf).
   */
  hub?: Hub<string>;
  /** The task journal: `accepted` (ingress); absent = none. */
  journal?: Journal;
  /** Reads one request's journal (sync-gateway: GET /requests/{id}/events). */
  readJournal?: (lookup: JournalLookup) => Promise<JournalEvent[]>;
  /** This process's gateway id: sync requests are stamped with it so their results come to its Hub. */
  replyTo?: string;
  /** A result kept in Redis by the executors (SYNC_FOLLOW_OUT=false), for long-polls; by result id. */
  lookup?: (resultId: string) => Promise<string | undefined>;
  /** Each role's logger, so a request's log lines carry the role that served it. */
  ingressLog?: Logger;
  gatewayLog?: Logger;
  /**
   * Cancels a client's request (ingress role; @requester/shared cancelRequest): `by` is who asked.
   */
  cancel?: (client: string | undefined, requestId: string, by: string) => Promise<CancelOutcome>;
  /**
   * Whether a client's requestId names a request known here (ingress role: claimed within
   * QUEUE_DEDUP_WINDOW, cancelled already, or in the outbox); absent = every id is (then a cancel
   * of an unknown id is recorded and meets nothing).
   */
  known?: (client: string | undefined, requestId: string) => Promise<boolean>;
  /** Shutdown began: waits are cut short (202 / 404 pending) and connections are not kept alive. */
  closing?: boolean;
}

export interface ApiSettings {
  maxBodyBytes: number;
  /** Bytes of request bodies read and handled at once (MAX_BODY_BYTES_IN_FLIGHT); default unbounded. */
  maxBodyBytesInFlight?: number;
  /** Of those, what one API key may hold (see bodyBytesPerKey); default unbounded. */
  maxBodyBytesInFlightPerKey?: number;
  /** Sync calls and long-polls of one API key waiting at once (SYNC_MAX_WAITERS_PER_KEY); default unbounded. */
  maxWaitersPerKey?: number;
  /** Journal lookups of one API key at once (EVENTS_MAX_LOOKUPS_PER_KEY); default unbounded. */
  maxEventLookupsPerKey?: number;
  syncTimeoutMs: number;
  longPollMaxMs: number;
  /** Retry-After of a 503 (seconds). */
  unavailableRetryAfterSeconds?: number;
  /** API keys and their scopes (`auth/`): `openAccess()` when AUTH=off. */
  access: Access;
  /** The live credential names `meta.credentials` may name (`credentials/`); absent = not checked here. */
  credentialNames?: CredentialNames | undefined;
  /** The destinations `meta.destination` may name (`destinations/`); absent = not checked here. */
  destinations?: DestinationDoor | undefined;
}

const syncReplies = counter('sync_replies_total', 'Sync calls and long-polls, by whether a result came', [
  'outcome',
]);

export function createApi(parts: ApiParts, settings: ApiSettings, logger: Logger): Hono<Env> {
  const app = new Hono<Env>();
  app.use(correlated());
  app.use(traced());
  app.use(observe(() => parts.closing === true, logger));
  const auth = authenticate<Env>(settings.access, refuse);
  app.use('/request', auth);
  app.use('/requests/*', auth);
  const fair = fairness(settings);
  app.post('/request', (c) => submitRequest(c, parts, settings, fair));
  app.get('/requests/:id', (c) => getResult(c, parts, settings, fair));
  app.get('/requests/:id/events', (c) => getEvents(c, parts, settings, fair));
  app.delete('/requests/:id', (c) => cancelOwn(c, parts, settings));
  app.get('/openapi.json', (c) => c.json(openApiDocument()));
  app.notFound((c) => problem(c, 404, 'not_found', `no route ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    log(c).error({ err }, 'unhandled error in the HTTP API');
    return problem(c, 500, 'internal', 'internal error');
  });
  return app;
}

/** What the API holds for its callers, bounded for the instance and per API key (see ../fair). */
interface Fairness {
  bodies: BodyBudgets;
  waits: KeySlots;
  lookups: KeySlots;
}

function fairness(settings: ApiSettings): Fairness {
  const unbounded = Number.POSITIVE_INFINITY;
  const instance = new ByteBudget(settings.maxBodyBytesInFlight ?? unbounded);
  return {
    bodies: new BodyBudgets(instance, settings.maxBodyBytesInFlightPerKey ?? unbounded),
    waits: new KeySlots(settings.maxWaitersPerKey ?? unbounded),
    lookups: new KeySlots(settings.maxEventLookupsPerKey ?? unbounded),
  };
}

/** A 429 for a key that holds its share of something already (the instance still has room). */
function overShare(c: Context<Env>, detail: string): Response {
  c.header('Retry-After', '1');
  return problem(c, 429, 'rate_limited', detail);
}

async function submitRequest(
  c: Context<Env>,
  parts: ApiParts,
  settings: ApiSettings,
  fair: Fairness,
): Promise<Response> {
  const submit = parts.submit;
  if (!submit) return notServed(c, 'POST /request', 'ingress');
  const caller = c.get('caller');
  // Before a byte of the body is read: a key over its rate holds nothing of this instance.
  const limited = await settings.access.takeRate(caller);
  if (limited) return refuse(c, limited);
  const contentType = requestHeader(c, 'content-type');
  if (!isJsonMediaType(contentType)) {
    const got = contentType ? `got ${JSON.stringify(contentType.slice(0, 100))}` : 'none was given';
    return problem(c, 415, 'unsupported_media_type', `Content-Type must be application/json; ${got}`);
  }
  const limit = settings.access.bodyLimit(caller, settings.maxBodyBytes);
  const bodies = fair.bodies.of(caller?.keyId);
  const body = await readJsonBody(nodeRequest(c) ?? c.req.raw, limit, bodies);
  if (!body.ok) {
    if (body.status === 503 || body.status === 429) c.header('Retry-After', '1');
    return problem(c, body.status, BODY_CODES[body.status], body.message);
  }
  let accepted: Accepted | Response;
  try {
    accepted = await accept(c, parts, settings, submit, body.value, fair.waits);
  } finally {
    // The body's bytes are held until Kafka has its copy, not during a sync wait.
    bodies.give(body.bytes);
  }
  if (accepted instanceof Response) return accepted;
  if (!accepted.result) return c.json({ requestId: accepted.id }, 202);
  try {
    const json = await readable(c, settings.access, await accepted.result, accepted.until);
    return reply(c, accepted.id, json, 'sync');
  } finally {
    accepted.slot?.leave();
  }
}

const BODY_CODES = {
  400: 'invalid_request',
  413: 'payload_too_large',
  429: 'rate_limited',
  503: 'overloaded',
} as const;

/** A request written to `in`; `result` is the sync wait for it, when the caller waits. */
interface Accepted {
  id: string;
  /** When the sync wait ends (see `readable`). */
  until: number;
  result: Promise<string | undefined> | undefined;
  /** The caller's waiting slot, given back once it is answered. */
  slot?: Slot | undefined;
}

/** Validates, checks the requestId, and writes to `in`; a Response when it refuses. */
async function accept(
  c: Context<Env>,
  parts: ApiParts,
  settings: ApiSettings,
  submit: Submit,
  input: unknown,
  waits: KeySlots,
): Promise<Accepted | Response> {
  const parsed = safeParseRequestEnvelope(input);
  if (!parsed.ok) return problem(c, 400, 'invalid_request', parsed.error.message, parsed.error.issues);
  // Acceptance is now: a deadline given as a duration counts from here, and one already past is refused.
  const acceptedAt = Date.now();
  const deadline = resolveDeadline(parsed.value.meta, acceptedAt);
  if (!deadline.ok) return problem(c, 400, 'invalid_request', deadline.error.message, deadline.error.issues);
  const admitted = await settings.access.admit(c.get('caller'), parsed.value, input);
  if (!admitted.ok) return refuse(c, admitted.refusal);
  // A destination's call is what the credential checks judge (its URL, its credential); the
  // request goes to `in` as sent, resolved again by the executor.
  const resolved = settings.destinations
    ? await settings.destinations.resolve(c.get('caller'), admitted.envelope)
    : { call: admitted.envelope };
  if ('refusal' in resolved) return refuse(c, resolved.refusal);
  const noCredential = await settings.credentialNames?.refusal(resolved.call);
  if (noCredential) return refuse(c, noCredential);
  const id = admitted.envelope.meta.requestId;
  useLog(c, parts.ingressLog, id);
  // A requestId is claimed in the caller's namespace: another key's same id is no conflict.
  const refused = await claimRequestId(c, parts.claim, admitted.envelope, settings);
  if (refused) return refused;
  // The PRODUCER span's context goes in meta.traceparent: the router's span continues it. Started
  // only now: a refused claim sends nothing (and would leave the span open).
  const sending = startSpan('send in', serverSpan(c, admitted.envelope.meta.traceparent), {
    kind: SpanKind.PRODUCER,
    attributes: { 'messaging.system': 'kafka', 'messaging.operation.type': 'send' },
  });
  // Without a deadline of its own, the operator's defaults (its key's, its destination's) give one.
  const defaults = [
    c.get('caller')?.scopes.deadline,
    'defaultDeadline' in resolved ? resolved.defaultDeadline : undefined,
  ];
  const defaulted = defaultDeadlineAt(defaults, admitted.envelope.meta, acceptedAt);
  const envelope = withDefaultDeadline(
    stamp(admitted.envelope, traceparentOf(sending), acceptedAt, deadline.at),
    defaulted,
  );

  // The waiter is registered before the produce: a result that comes back fast cannot slip past.
  // A key holding its share of waiters already is answered 202 + Location at once, as when the
  // gateway is crowded.
  const slot =
    envelope.meta.sync && !parts.closing && parts.hub ? waits.enter(c.get('caller')?.keyId) : undefined;
  const hub = slot ? parts.hub : undefined;
  const abandon = new AbortController();
  const until = Date.now() + (hub ? settings.syncTimeoutMs : 0);
  // Without a hub the arguments are not evaluated: c.req.raw.signal builds the whole Web Request.
  const result = hub?.wait(clientScoped(envelope.meta.client, id), {
    timeoutMs: settings.syncTimeoutMs,
    signal: AbortSignal.any([abandon.signal, c.req.raw.signal]),
  });
  try {
    const replyTo = hub && parts.replyTo ? { [REPLY_TO_HEADER]: parts.replyTo } : undefined;
    await submit(kafkaKeyFor(envelope), JSON.stringify(envelope), replyTo);
  } catch (err) {
    sending.setStatus({ code: SpanStatusCode.ERROR });
    abandon.abort();
    slot?.leave();
    log(c).warn({ err }, 'Kafka did not acknowledge the request; refused with 503');
    return unavailable(
      c,
      settings,
      'the request could not be written to Kafka; nothing was accepted, retry later',
    );
  } finally {
    sending.end();
  }
  parts.journal?.emit({ type: 'accepted', requestId: id, client: envelope.meta.client, channel: 'http' });
  return {
    id,
    until,
    result: envelope.meta.sync ? (result ?? Promise.resolve(undefined)) : undefined,
    slot,
  };
}

/**
 * Refuses a requestId that names a different request within the dedup window (409); a replay of
 * the same request goes on (idempotent). When Redis does not answer nothing is accepted (503):
 * accepting would drop the guarantee silently.
 */
async function claimRequestId(
  c: Context<Env>,
  claim: ClaimRequestId | undefined,
  validated: RequestEnvelope,
  settings: ApiSettings,
): Promise<Response | undefined> {
  if (!claim) return undefined;
  const { client, requestId: id } = validated.meta;
  let claimed: Awaited<ReturnType<ClaimRequestId>>;
  try {
    claimed = await claim(client, id, requestFingerprint(validated));
  } catch (err) {
    log(c).warn({ err }, 'Redis did not answer the requestId check; refused with 503');
    return unavailable(c, settings, 'the requestId could not be checked; nothing was accepted, retry later');
  }
  if (claimed !== 'conflict') return undefined;
  return problem(
    c,
    409,
    'request_id_conflict',
    `requestId ${JSON.stringify(id)} was already used by a different request; use a new requestId (an identical retry is accepted)`,
  );
}

/**
 * What the ingress adds to the Kafka copy: `createdAt` is when *this* service accepted the request
 * (so a client cannot backdate it), `tryCount`, `waitTime` and `retryBase` start over,
 * `traceparent` becomes the ingress's own span (a child of the caller's), or starts a trace when
 * there is neither a span nor a caller's, and a `deadline` given as a duration becomes the instant
 * it resolved to (`deadlineAt`), so that every later reader finds the same one.
 */
function stamp(
  envelope: RequestEnvelope,
  spanTraceparent: string | undefined,
  acceptedAt: number,
  deadlineAt: number | undefined,
): RequestEnvelope {
  const { tryCount: _attempts, waitTime: _waited, retryBase: _base, ...rest } = envelope;
  const traceparent = spanTraceparent ?? rest.meta.traceparent ?? newTraceparent();
  return withDeadlineInstant(
    { ...rest, meta: { ...rest.meta, traceparent }, createdAt: formatRfc3339(acceptedAt) },
    deadlineAt,
  );
}

async function getResult(
  c: Context<Env>,
  parts: ApiParts,
  settings: ApiSettings,
  fair: Fairness,
): Promise<Response> {
  const hub = parts.hub;
  if (!hub) return notServed(c, 'GET /requests/{id}', 'sync-gateway');
  const id = c.req.param('id') ?? '';
  useLog(c, parts.gatewayLog, id);
  const wait = waitMs(c.req.query('wait'), settings.longPollMaxMs);
  if (typeof wait === 'string')
    return problem(c, 400, 'invalid_request', `wait: ${wait}`, [{ path: 'wait', message: wait }]);
  // The caller's own request of that id: another key's is another result, never looked at.
  const resultId = clientScoped(callerClient(c), id);
  const mayNotWait = wait > 0 ? settings.access.mayNotWait(c.get('caller')) : undefined;
  if (mayNotWait) return refuse(c, mayNotWait);
  if (wait > 0 && hub.crowded() && hub.peek(resultId) === undefined) {
    c.header('Retry-After', '1');
    return problem(c, 503, 'overloaded', 'too many callers are waiting on this sync-gateway; retry later');
  }
  // Every wait counts, another key's result included (it is answered only when `wait` ends).
  const slot = wait > 0 ? fair.waits.enter(c.get('caller')?.keyId) : undefined;
  if (wait > 0 && !slot)
    return overShare(
      c,
      `this API key already has ${fair.waits.max} callers waiting on this sync-gateway (SYNC_MAX_WAITERS_PER_KEY); retry later`,
    );
  try {
    const timeoutMs = parts.closing ? 0 : wait;
    const until = Date.now() + timeoutMs;
    const json = await (parts.lookup
      ? lookOut(hub, parts.lookup, resultId, until, c.req.raw.signal)
      : hub.wait(resultId, { timeoutMs, signal: c.req.raw.signal }));
    return reply(c, id, await readable(c, settings.access, json, until), 'poll');
  } finally {
    slot?.leave();
  }
}

/** How often a waiting long-poll re-reads the result kept in Redis (SYNC_FOLLOW_OUT=false). */
const LOOKUP_INTERVAL_MS = 1_000;

/**
 * A long-poll when this gateway does not follow `out`: the result passed here (a sync call of its
 * own), or was kept in Redis by the executor (a sync call taken by any gateway), else it is waited
 * for on the Hub and looked up again every LOOKUP_INTERVAL_MS until `until`.
 */
async function lookOut(
  hub: Hub<string>,
  lookup: (resultId: string) => Promise<string | undefined>,
  id: string,
  until: number,
  signal: AbortSignal,
): Promise<string | undefined> {
  for (;;) {
    const json = hub.peek(id) ?? (await lookup(id));
    const left = until - Date.now();
    if (json !== undefined || left <= 0 || signal.aborted) return json;
    const timeoutMs = Math.min(left, LOOKUP_INTERVAL_MS);
    // A crowded Hub answers at once: pause instead, or this loop would hammer Redis.
    const woken = hub.crowded()
      ? await sleep(timeoutMs, undefined, { signal }).catch(() => undefined)
      : await hub.wait(id, { timeoutMs, signal });
    if (woken !== undefined) return woken;
  }
}

/**
 * The journal of one request (`?since=` as `requester trace --since`): the events of the caller's
 * own request of that id (the client namespace). Another key's request of the same id is not
 * told; with none of its own the caller gets 404, as for an unknown requestId.
 */
async function getEvents(
  c: Context<Env>,
  parts: ApiParts,
  settings: ApiSettings,
  fair: Fairness,
): Promise<Response> {
  const read = parts.readJournal;
  if (!read) return notServed(c, 'GET /requests/{id}/events', 'sync-gateway');
  const id = c.req.param('id') ?? '';
  useLog(c, parts.gatewayLog, id);
  const since = c.req.query('since');
  const sinceMs = since === undefined || since === '' ? undefined : lookupSince(since);
  if (typeof sinceMs === 'string')
    return problem(c, 400, 'invalid_request', `since: ${sinceMs}`, [{ path: 'since', message: sinceMs }]);
  const slot = fair.lookups.enter(c.get('caller')?.keyId);
  if (!slot)
    return overShare(
      c,
      `this API key already runs ${fair.lookups.max} journal lookups on this sync-gateway (EVENTS_MAX_LOOKUPS_PER_KEY); retry later`,
    );
  let events: JournalEvent[];
  try {
    events = await read({ requestId: id, ...(sinceMs === undefined ? {} : { sinceMs }) });
  } catch (err) {
    log(c).warn({ err }, 'the task journal could not be read');
    return unavailable(c, settings, 'the task journal could not be read; retry later');
  } finally {
    slot.leave();
  }
  const client = callerClient(c);
  const own = eventsOfClient(events, client);
  if (own.length === 0 || !settings.access.mayReadClient(c.get('caller'), client))
    return problem(c, 404, 'not_found', `no journal events for request ${JSON.stringify(id)}`);
  return c.json({ requestId: id, events: own }, 200);
}

/**
 * `DELETE /requests/{id}`: the caller's own request of that id is cancelled (requestIds are per
 * client, so another key's request of the same id is never touched, nor told of). Answered 202 at
 * once: the request's one result, `cancelled` (status 499), follows on `out` from the hop that
 * holds it; an attempt already in flight finishes, and no other starts. An id the caller never
 * sent (as far as `parts.known` tells: accepted within QUEUE_DEDUP_WINDOW, cancelled already, or in
 * the outbox) is answered 404 and nothing is recorded; another key's request of that id is looked
 * up under the caller's own namespace, so it is answered alike: 404, never a hint that it exists.
 */
async function cancelOwn(c: Context<Env>, parts: ApiParts, settings: ApiSettings): Promise<Response> {
  if (!parts.cancel) return notServed(c, 'DELETE /requests/{id}', 'ingress');
  const id = c.req.param('id') ?? '';
  useLog(c, parts.ingressLog, id);
  if (!/^[\x21-\x7e]{1,256}$/.test(id))
    return problem(c, 400, 'invalid_request', 'the requestId must be 1 to 256 printable characters', [
      { path: 'id', message: 'not a requestId' },
    ]);
  const client = callerClient(c);
  try {
    if (parts.known && !(await parts.known(client, id)))
      return problem(c, 404, 'not_found', `no request ${JSON.stringify(id)} of this API key`);
    const outcome = await parts.cancel(client, id, ownerActor(client));
    log(c).info({ requestId: id, first: outcome.first, outboxWoken: outcome.outboxWoken }, 'cancel recorded');
    const { outboxWoken: _w, ...body } = outcome;
    return c.json(body, 202);
  } catch (err) {
    log(c).warn({ err }, 'the cancel could not be recorded; refused with 503');
    return unavailable(c, settings, 'the cancel could not be recorded; retry later');
  }
}

/** The namespace of the caller's requests: its key's name (`meta.client`), none with AUTH=off. */
function callerClient(c: Context<Env>): string | undefined {
  return c.get('caller')?.name;
}

/**
 * A result only for the key that sent its request. Another key's result is answered as no result,
 * and not before `until`, when no result would have been: an early answer would tell that the
 * requestId exists.
 */
async function readable(
  c: Context<Env>,
  access: Access,
  json: string | undefined,
  until: number,
): Promise<string | undefined> {
  if (json === undefined || access.mayRead(c.get('caller'), json)) return json;
  const ms = until - Date.now();
  if (ms > 0) await sleep(ms, undefined, { signal: c.req.raw.signal }).catch(() => {});
  return undefined;
}

/** `?wait=` as milliseconds, capped; a string says why it was refused. Absent = do not wait. */
function waitMs(text: string | undefined, capMs: number): number | string {
  if (text === undefined || text === '') return 0;
  const parsed = tryParseDuration(text);
  if (!parsed.ok) return parsed.message;
  if (parsed.ns < 0n) return `must not be negative (got ${text})`;
  return Math.min(Number(parsed.ns / 1_000_000n), capMs);
}

/**
 * A result is answered `200` with the envelope as the body, whatever the target's status: the
 * caller asked for the envelope, and a proxy must not mistake a target's 503 for ours. No result
 * yet: a sync call gets `202` + `Location` (the task goes on), a long-poll `404 pending`.
 */
function reply(c: Context<Env>, id: string, json: string | undefined, kind: 'sync' | 'poll'): Response {
  syncReplies.inc({ outcome: json === undefined ? 'pending' : 'result' });
  if (json !== undefined) {
    const after = retryAfterSeconds(json);
    if (after !== undefined) c.header('Retry-After', String(after));
    return c.body(json, 200, { 'content-type': 'application/json' });
  }
  if (kind === 'poll') {
    return c.json(
      { requestId: id, status: 'pending', detail: 'no result yet; ask again with ?wait=30s' },
      404,
    );
  }
  c.header('Location', `/requests/${encodeURIComponent(id)}`);
  return c.json({ requestId: id, status: 'pending' }, 202);
}

interface ResultHead {
  response?: { status?: unknown; headers?: Record<string, unknown> };
  meta?: { waitTime?: unknown };
}

/**
 * `Retry-After` of a sync reply: the limiter's wait (`meta.waitTime`, ns, rounded up to seconds)
 * when it made the call wait, else the target's own `Retry-After` when it answered 429.
 */
export function retryAfterSeconds(json: string): number | undefined {
  let head: ResultHead;
  try {
    head = JSON.parse(json) as ResultHead;
  } catch {
    return undefined;
  }
  const waitNs = typeof head.meta?.waitTime === 'number' ? head.meta.waitTime : 0;
  if (waitNs > 0) return Math.ceil(waitNs / 1e9);
  if (head.response?.status !== 429) return undefined;
  return targetRetryAfter(head.response.headers ?? {});
}

function targetRetryAfter(headers: Record<string, unknown>): number | undefined {
  const entry = Object.entries(headers).find(([name]) => name.toLowerCase() === 'retry-after');
  const value = typeof entry?.[1] === 'string' ? entry[1].trim() : '';
  if (/^\d+$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function notServed(c: Context<Env>, route: string, role: string): Response {
  return problem(
    c,
    404,
    'not_found',
    `${route} is served by the ${role} role, which does not run in this process`,
  );
}

/** A dependency (Kafka, Redis) did not answer: 503, with when to try again. */
function unavailable(c: Context<Env>, settings: ApiSettings, detail: string): Response {
  c.header('Retry-After', String(settings.unavailableRetryAfterSeconds ?? 5));
  return problem(c, 503, 'dependency_unavailable', detail);
}

function refuse(c: Context<Env>, refusal: Refusal | CredentialRefusal): Response {
  for (const [name, value] of Object.entries(refusal.headers ?? {})) c.header(name, value);
  return problem(c, refusal.status, refusal.code, refusal.detail, refusal.issues);
}

/** An RFC 9457 problem body; `code` is the stable machine code of RequesterError. */
function problem(
  c: Context<Env>,
  status: 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 500 | 503,
  code: ErrorCode,
  detail: string,
  issues?: ReadonlyArray<{ path: string; message: string }>,
): Response {
  const body = {
    type: 'about:blank',
    title: TITLES[status],
    status,
    code,
    detail,
    ...(issues ? { issues } : {}),
  };
  return c.body(JSON.stringify(body), status, { 'content-type': 'application/problem+json' });
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};
