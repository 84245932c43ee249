import { z } from 'zod';

/**
 * The task journal's event (one record of `KAFKA_TOPIC_EVENTS`, keyed by requestId): one step of
 * one request — accepted, routed, leased, held, attempted, retried, answered from the cache,
 * completed, dead-lettered, replayed, acted on by an operator. A destination's operator actions
 * (create, update, delete, pause, resume, recover) are `admin_action` events of their own subject,
 * `destinationSubject(name)`. Only ids, codes and timings: never a header, a body or a URL,
 * so the journal holds nothing secret and may be kept and read more widely than `in` and `out`.
 *
 * Not strict (readers ignore fields added later); readers must skip event types they do not know.
 */

const requestId = z.string().min(1).max(256);
const epochMs = z.number().int().nonnegative().meta({ description: 'Epoch milliseconds.' });

/** Whose breaker a hold is: absent or `origin`, every caller's; `caller`, the request's client's alone. */
const holdScope = z.enum(['origin', 'caller']).optional().meta({
  description:
    "Whose breaker: `origin` (absent: the same), held for every caller; `caller`, held for this request's client alone (only its calls failed, or the receiver's opt-out answered it).",
});

const common = {
  requestId,
  at: epochMs.meta({ description: 'When the step happened (epoch ms, clock of the process that saw it).' }),
  client: z.string().optional().meta({
    description:
      'meta.client of the request when the process knew it (owner check of GET /requests/{id}/events).',
  }),
};

export const journalEventSchema = z
  .discriminatedUnion('type', [
    z.object({
      ...common,
      type: z.literal('accepted'),
      channel: z.enum(['http', 'kafka']).meta({
        description:
          'http: POST /request accepted it; kafka: the router met a record of `in` written straight to Kafka.',
      }),
    }),
    z.object({
      ...common,
      type: z.literal('routed'),
      to: z.enum(['redis', 'outbox']),
      due: epochMs.meta({ description: 'When the task may run (epoch ms).' }),
    }),
    z
      .object({ ...common, type: z.literal('relayed') })
      .meta({ description: 'The relay moved the task from the outbox back to `in`.' }),
    z.object({
      ...common,
      type: z.literal('leased'),
      executor: z.string().meta({ description: 'The executor process that leased the task.' }),
      tryCount: z.number().int().nonnegative().meta({ description: 'Attempts made before this lease.' }),
      priority: z.number().int().min(-10).max(10).optional().meta({
        description:
          "The task's priority among its client's (`meta.priority`) when not 0: why it ran before or after the client's others.",
      }),
      concurrencyKey: z.string().optional().meta({
        description: "The request's `meta.concurrency` key (the client's own), when it has one.",
      }),
      debounceKey: z.string().optional().meta({
        description:
          "The request's `meta.debounce` key (the client's own), when it has one (a `debounced` event follows when a newer request of the key replaced it).",
      }),
    }),
    z.object({
      ...common,
      type: z.literal('held'),
      by: z
        .enum(['limiter', 'breaker', 'bulkhead', 'concurrency', 'pacing', 'pause', 'hold', 'debounce'])
        .meta({
          description:
            'debounce: the router put it off to the end of its `meta.debounce` burst (until: its due time then; a newer request of the key puts the burst off again, and replaces it). concurrency: its `meta.concurrency` key is at its limit of calls in flight; it waits parked for a call of the key to end, not an attempt. pacing: the origin is held or paced at what the target asked for (429/503 + Retry-After, RateLimit headers), not an attempt. pause: an operator paused its origin, client or partition (pausedBy says who and what). hold: its origin is held back (failing for ORIGIN_FAILING_HOLD_AFTER, or the receiver opted out): it waits for the next probe instant, not an attempt.',
        }),
      until: epochMs,
      pausedBy: z.string().optional().meta({
        description: 'by pause: who paused, and what (`ops-oncall: origin https://api.x.com:443`).',
      }),
    }),
    z.object({
      ...common,
      type: z.literal('throttled'),
      signal: z.enum(['slow', 'overload']).meta({
        description:
          'What this request’s answer said of its target origin: slow (429, 503 + Retry-After), overload (timeout, transport error, 5xx).',
      }),
      limit: z
        .number()
        .int()
        .positive()
        .meta({ description: 'The origin’s adaptive concurrency limit after it (calls in flight).' }),
      rate: z
        .number()
        .positive()
        .optional()
        .meta({ description: 'The pace of the origin after it (calls/s).' }),
      holdMs: z.number().int().nonnegative().meta({ description: 'How long the origin is held from then.' }),
    }),
    z.object({
      ...common,
      type: z.literal('attempt'),
      n: z.number().int().positive().meta({ description: 'Which attempt (1 = the first).' }),
      status: z.number().int().optional().meta({ description: 'HTTP status of the target.' }),
      error: z.string().optional().meta({ description: 'Error code when the target gave no answer.' }),
      durationMs: z.number().nonnegative(),
      probe: z.literal(true).optional().meta({
        description:
          'The call was the probe of a held origin (failing-held): when it fails it is not counted as an attempt of the request, which goes on waiting (the next attempt has the same n).',
      }),
    }),
    z
      .object({
        ...common,
        type: z.literal('origin_failing'),
        origin: z.string().meta({
          description:
            'The target origin (scheme://host:port; never a path, query or userinfo), as the per-origin metrics name it.',
        }),
        reason: z.enum(['failing', 'opt_out']).meta({
          description:
            'failing: it failed for ORIGIN_FAILING_HOLD_AFTER without a success (or ORIGIN_FAILING_HOLD_FAILURES times in a row); opt_out: its answer carried `webhook-delivery: disable` (ORIGIN_OPT_OUT).',
        }),
        since: epochMs.meta({ description: 'When the hold began.' }),
        failures: z.number().int().nonnegative().meta({ description: 'Failures in the run so far.' }),
        failingSince: epochMs.optional().meta({ description: 'When the run of failures began.' }),
        scope: holdScope,
      })
      .meta({
        description:
          "This request's answer held its origin back: the origin's tasks wait (not attempts) while one probe per BREAKER_MAX_OPEN_DURATION checks it (none after an opt-out, until `requester breakers reset`).",
      }),
    z
      .object({
        ...common,
        type: z.literal('origin_recovered'),
        origin: z.string().meta({ description: 'The target origin (scheme://host:port).' }),
        since: epochMs.meta({ description: 'When the hold had begun.' }),
        failures: z.number().int().nonnegative().meta({ description: 'Failures in the run it ended.' }),
        scope: holdScope,
      })
      .meta({
        description: "This request was the probe that found its held origin back: the origin's tasks resume.",
      }),
    z.object({
      ...common,
      type: z.literal('retry_scheduled'),
      delayMs: z.number().int().nonnegative(),
      where: z.enum(['redis', 'outbox', 'executor']).meta({
        description:
          'Where the task waits for its retry: redis (the queue), outbox (PostgreSQL, beyond the Redis horizon) or executor (parked in the executor that ran it, up to 30 s).',
      }),
    }),
    z.object({
      ...common,
      type: z.literal('cache'),
      outcome: z.enum(['hit', 'coalesced']),
    }),
    z.object({
      ...common,
      type: z.literal('completed'),
      status: z
        .number()
        .int()
        .meta({ description: 'HTTP status of the result (synthetic for an error result).' }),
      error: z.string().optional().meta({ description: 'Error code of an error result.' }),
      tryCount: z.number().int().nonnegative(),
    }),
    z.object({
      ...common,
      type: z.literal('dead_lettered'),
      reason: z.string(),
    }),
    z.object({
      ...common,
      type: z.literal('replayed'),
      by: z.string().meta({
        description:
          'What re-submitted the request: `requester dlq replay` (CLI, admin API, operator UI), or `requester destinations recover <name>`.',
      }),
      dlq: z
        .string()
        .meta({
          description:
            'The dead letter it was re-sent from (`topic/partition/offset` of the DLQ record), as the `requester-replay-of` header of its record on `in` names it.',
        })
        .optional(),
    }),
    z
      .object({
        ...common,
        type: z.literal('expired'),
        deadline: epochMs.meta({ description: 'The request’s start-by deadline (meta.deadline, epoch ms).' }),
        tryCount: z.number().int().nonnegative().meta({ description: 'Attempts made before it expired.' }),
        stage: z.enum(['queued', 'retry', 'wait']).meta({
          description:
            'queued: its turn came after the deadline; retry: the pause before its next attempt would end after it; wait: a rate limit, breaker or other wait would.',
        }),
      })
      .meta({
        description:
          'The request’s start-by deadline passed (or would before its next start): no further attempt; its result (`expired`) follows as `completed`.',
      }),
    z
      .object({
        ...common,
        type: z.literal('debounced'),
        by: z
          .string()
          .meta({ description: 'The requestId of the newer request of the key that replaced it.' }),
        key: z.string().meta({ description: 'Its debounce key (meta.debounce.key, the client’s own).' }),
      })
      .meta({
        description:
          'A newer request of its debounce key replaced it: no attempt; its result (`debounced`) follows as `completed`.',
      }),
    z
      .object({
        ...common,
        type: z.literal('cancelled'),
        by: z.string().meta({
          description:
            'Who cancelled the request: `client:<API key name>` (DELETE /requests/{id}), an admin key’s name, or `cli:<os user>`. No attempt starts after it; its result (`cancelled`) follows as `completed`.',
        }),
      })
      .meta({ description: 'The request was cancelled (recorded; the hop holding it answers it).' }),
    z.object({
      ...common,
      type: z.literal('admin_action'),
      action: z.string().meta({
        description:
          'The operator action on this request (`dlq.replay`, `dlq.delete`) or, under a destination subject, on that destination (`destinations.create|update|delete|recover`, `pause`, `resume`).',
      }),
      destination: z.string().optional().meta({
        description:
          'The destination the action changed: its events are keyed `destination <name>` (a space, which no requestId holds), never under a request.',
      }),
      version: z.number().int().positive().optional().meta({
        description: 'The version of the destination the action made (create, update).',
      }),
      actor: z.string().meta({
        description:
          'Who: the admin API key’s name (operator UI, admin API), or `cli:<CLI_ACTOR>` (else `cli:<os user>@<host>`).',
      }),
      outcome: z.enum(['done', 'failed']),
    }),
  ])
  .meta({
    title: 'JournalEvent',
    description:
      'One step of one request, or an operator action on a destination. A record of KAFKA_TOPIC_EVENTS (key: requestId, or `destination <name>` for a destination) holds a JSON array of these, the steps of that request one process saw in one flush, in order.',
  });

export type JournalEvent = z.infer<typeof journalEventSchema>;

const DESTINATION_SUBJECT_PREFIX = 'destination ';

/**
 * The journal key (and `requestId` field) of a destination's operator actions. The space cannot
 * occur in a requestId (printable ASCII without spaces), so a destination's story is never read as
 * a request's, nor a caller's request as a destination's.
 */
export function destinationSubject(name: string): string {
  return `${DESTINATION_SUBJECT_PREFIX}${name}`;
}

export function isDestinationSubject(key: string): boolean {
  return key.startsWith(DESTINATION_SUBJECT_PREFIX);
}
export type JournalEventType = JournalEvent['type'];

/** Events as the hops write them: `at` defaults to now. */
export type JournalEventInput = JournalEvent extends infer E
  ? E extends JournalEvent
    ? Omit<E, 'at'> & { at?: number }
    : never
  : never;

/**
 * Whether an event is a step of the happy path — accepted, routed to Redis to run now, leased for
 * a first attempt, a first attempt answered below 400, a cache hit, completed below 400 in one
 * attempt. With EVENTS=failures only the other stories are written (see writer.ts).
 */
export function isHappyStep(event: JournalEvent): boolean {
  switch (event.type) {
    case 'accepted':
    case 'cache':
      return true;
    case 'routed':
      return event.to === 'redis' && event.due <= event.at;
    case 'leased':
      return event.tryCount === 0;
    case 'attempt':
      return event.n === 1 && event.status !== undefined && event.status < 400;
    case 'completed':
      return event.tryCount <= 1 && event.error === undefined && event.status < 400;
    default:
      return false;
  }
}

/** Events after which nothing more happens to the request (until a replay). */
export function isFinalStep(event: JournalEvent): boolean {
  return event.type === 'completed' || event.type === 'dead_lettered';
}

/**
 * Headers the service's own writers of `in` set on a record: the ingress (`requester-channel`),
 * the relay (`requester-relayed-from`) and a DLQ replay (`requester-replay-of`, the dead letter's
 * `topic/partition/offset`). A record with one of them had its journal story begun where it was
 * written; the router journals `accepted` (over Kafka) for the others.
 */
export const CHANNEL_HEADER = 'requester-channel';
export const RELAYED_FROM_HEADER = 'requester-relayed-from';
export const REPLAY_OF_HEADER = 'requester-replay-of';
/**
 * The relay's record of an outbox row: the row's due time (RFC 3339). The router queues a signed
 * relayed record for that instant: the relay may stage a row before it is due (RELAY_STAGE_AHEAD).
 */
export const RELAY_DUE_AT_HEADER = 'requester-due-at';
export const JOURNALED_BY_HEADERS: ReadonlySet<string> = new Set([
  CHANNEL_HEADER,
  RELAYED_FROM_HEADER,
  REPLAY_OF_HEADER,
]);
