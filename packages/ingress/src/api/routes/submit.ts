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
import { REPLY_TO_HEADER } from '@requester/shared/replies';
import { formatRfc3339 } from '@requester/shared/time';
import {
  newTraceparent,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceparentOf,
} from '@requester/shared/tracing';
import type { Context } from 'hono';
import { isJsonMediaType, readJsonBody } from '../../body/index.ts';
import { type ClaimRequestId, requestFingerprint } from '../../claims/index.ts';
import type { KeySlots, Slot } from '../../fair/index.ts';
import { nodeRequest, requestHeader } from '../../request/index.ts';
import type { Env } from '../context.ts';
import { log, useLog } from '../log/index.ts';
import { notServed, problem, refuse, unavailable } from '../problem.ts';
import { readable, reply } from '../reply.ts';
import type { ApiParts, ApiSettings, Fairness, Submit } from '../settings.ts';
import { serverSpan } from '../tracing/index.ts';

/**
 * `POST /request` (ingress): validate, stamp, write to `in`, answer `202 {requestId}`; with
 * `meta.sync: true` and a Hub in this process, wait for the result and answer `200` + envelope.
 */
export async function submitRequest(
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
  // `accepted` is stamped when the write starts: the router may route the record before Kafka's
  // acknowledgement comes back here, and its `routed` must not come first.
  const writing = Date.now();
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
  parts.journal?.emit({
    type: 'accepted',
    requestId: id,
    client: envelope.meta.client,
    channel: 'http',
    at: writing,
  });
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
