import { openApiComponents } from '@requester/shared/contract';

/**
 * The OpenAPI 3.1 document of the HTTP API, served at `GET /openapi.json`. The request and result
 * schemas are the shared contract's JSON Schemas (the very schemas that validate input), so the
 * document cannot drift from the validator; only the small HTTP-side shapes are written here.
 */
type Json = Record<string, unknown>;

const json = (schemaRef: string): Json => ({
  'application/json': { schema: { $ref: `#/components/schemas/${schemaRef}` } },
});
const problem = (description: string): Json => ({
  description,
  content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
});
const retryAfter = (description: string): Json => ({
  description,
  schema: { type: 'integer', minimum: 0 },
});

/** Responses of the access control (`auth/`), shared by both operations. */
const UNAUTHORIZED: Json = {
  ...problem('No API key, or one that is unknown, revoked or replaced by a rotation (`code: unauthorized`).'),
  headers: { 'WWW-Authenticate': { description: '`Bearer realm="requester"`', schema: { type: 'string' } } },
};
const API_KEY_SCHEME: Json = {
  type: 'http',
  scheme: 'bearer',
  bearerFormat: 'rqk_<id>_<secret>',
  description:
    'An API key made by `requester keys create` (AUTH=on, the default). Its scopes decide the target hosts, sync calls, scheduling beyond REDIS_HORIZON, a rate and a body size; its name becomes `meta.client` of every request it sends, and only it reads their results.',
};

const PROBLEM: Json = {
  type: 'object',
  description: 'RFC 9457 problem details.',
  required: ['title', 'status', 'code'],
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: { type: 'string', description: 'Stable machine code, e.g. invalid_request, payload_too_large.' },
    issues: {
      type: 'array',
      description: 'For invalid_request: every offending field (dotted path) and what is wrong with it.',
      items: {
        type: 'object',
        required: ['path', 'message'],
        properties: { path: { type: 'string' }, message: { type: 'string' } },
      },
    },
  },
};

const ACCEPTED: Json = {
  type: 'object',
  required: ['requestId'],
  properties: {
    requestId: { type: 'string' },
    status: {
      type: 'string',
      enum: ['pending'],
      description: 'Present on a sync call not answered in time.',
    },
  },
};

const PENDING: Json = {
  type: 'object',
  required: ['requestId', 'status'],
  properties: {
    requestId: { type: 'string' },
    status: { type: 'string', enum: ['pending'] },
    detail: { type: 'string' },
  },
};

const RESULT_200: Json = {
  description:
    'The result envelope. The HTTP status is always 200 when a result is returned: the target’s status is `response.status` in the body (a 5xx from the target is not a failure of this API).',
  headers: {
    'Retry-After': retryAfter(
      'Seconds (rounded up) the rate limiter made the call wait (`meta.waitTime`), when it waited or the target answered 429.',
    ),
  },
  content: json('ResultEnvelope'),
};

const POST_REQUEST: Json = {
  operationId: 'submitRequest',
  summary: 'Submit a request for execution',
  description:
    'The body must be sent as `Content-Type: application/json`. Validates the envelope (a `meta.deadline` not after acceptance, or before `meta.scheduled`, is a 400), stamps `createdAt` and `meta.traceparent` (the ingress span, in the trace of the `traceparent` header or `meta.traceparent`, else a new trace), writes a `meta.deadline` duration as the instant it resolves to, and writes it to the `in` topic (key: `meta.partition`, else `meta.requestId`) with acknowledgement from every in-sync replica. Nothing is accepted that was not written. With `meta.sync: true` the call waits for the result up to the sync budget.',
  requestBody: { required: true, content: json('RequestEnvelope') },
  responses: {
    '200': RESULT_200,
    '202': {
      description:
        'Accepted (written to Kafka). For a sync call not answered within the budget (or when no sync-gateway runs in this process), `Location` points at the long-poll of the result; the task goes on.',
      headers: {
        Location: { description: '`/requests/{id}` (sync calls only).', schema: { type: 'string' } },
      },
      content: json('Accepted'),
    },
    '400': problem('Malformed JSON, or an envelope that breaks the contract (every bad field is named).'),
    '401': UNAUTHORIZED,
    '403': problem(
      'The API key may not ask for this (`code: forbidden`): a target host outside its hosts, a sync call, or — without the schedule scope — a wait beyond REDIS_HORIZON (`meta.scheduled`, a written `meta.retry.delay`/`maxDelay`, a limiter window); `issues` names each field. Nothing was written.',
    ),
    '409': problem(
      'meta.requestId was already used by a different request of this API key within the dedup window (QUEUE_DEDUP_WINDOW). An identical retry is accepted (202). requestIds are per client: another key using the same id is no conflict.',
    ),
    '413': problem('The body is larger than MAX_BODY_BYTES, or than the API key allows.'),
    '415': problem(
      'The Content-Type is not `application/json` (or `application/…+json`); forms and text/plain are refused.',
    ),
    '429': {
      ...problem(
        'The API key is over its rate (`code: rate_limited`; checked before the body is read), or already has its share of request bytes in flight on this instance (MAX_BODY_BYTES_IN_FLIGHT_PER_KEY); nothing was written.',
      ),
      headers: { 'Retry-After': retryAfter('Seconds (rounded up) until the key may send again.') },
    },
    '503': {
      ...problem(
        'Kafka did not acknowledge the write in time, Redis did not answer the requestId check, or too many request bytes are in flight on this instance (MAX_BODY_BYTES_IN_FLIGHT); nothing was accepted. Retry later.',
      ),
      headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
    },
  },
};

const GET_REQUEST: Json = {
  operationId: 'getResult',
  summary: 'Long-poll the result of a request',
  description:
    'Answers from the sync-gateway: a result that already passed (kept for SYNC_CACHE_TTL, bounded by SYNC_CACHE_MAX_BYTES), else waits up to `wait` for it. requestIds are per client: the result is that of this API key’s own request of that id.',
  parameters: [
    { name: 'id', in: 'path', required: true, description: 'meta.requestId', schema: { type: 'string' } },
    {
      name: 'wait',
      in: 'query',
      required: false,
      description:
        'How long to wait for the result, as a Go duration (e.g. 30s); capped by LONG_POLL_MAX. Default 0.',
      schema: { type: 'string', examples: ['30s'] },
    },
  ],
  responses: {
    '200': RESULT_200,
    '400': problem('`wait` is not a valid Go duration.'),
    '401': UNAUTHORIZED,
    '403': problem(
      'A `wait` above 0 from an API key without the sync scope (`code: forbidden`, `issues` names `wait`): a long-poll holds a caller as a sync call does. Ask without `wait`.',
    ),
    '404': {
      description:
        'No result yet (still pending, unknown, or older than the recent-results cache; another API key’s request of the same id is another request, never answered here). Ask again with `wait`.',
      content: json('Pending'),
    },
    '429': {
      ...problem(
        'This API key already has its share of callers waiting on this sync-gateway (`code: rate_limited`, SYNC_MAX_WAITERS_PER_KEY). Retry later.',
      ),
      headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
    },
    '503': {
      ...problem(
        'Too many callers already wait on this sync-gateway (SYNC_MAX_WAITERS) and the result is not kept yet. Retry later.',
      ),
      headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
    },
  },
};

const GET_EVENTS: Json = {
  operationId: 'getRequestEvents',
  summary: 'What happened to a request (its task journal)',
  description:
    'The events of one request from the task journal (KAFKA_TOPIC_EVENTS; EVENTS=all by default), in the order they happened: accepted, routed, leased, held, attempt, throttled, retry_scheduled, cache, completed, dead_lettered, replayed... Only ids, codes and timings. Served by the sync-gateway; only the events of this API key’s own request of that id (requestIds are per client).',
  parameters: [
    { name: 'id', in: 'path', required: true, description: 'meta.requestId', schema: { type: 'string' } },
    {
      name: 'since',
      in: 'query',
      required: false,
      description:
        'Read the journal from this far back (a Go duration, e.g. 24h) or from this RFC 3339 time. Default 1h.',
      schema: { type: 'string', examples: ['24h'] },
    },
  ],
  responses: {
    '200': {
      description: 'The events, oldest first.',
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['requestId', 'events'],
            properties: {
              requestId: { type: 'string' },
              events: { type: 'array', items: { $ref: '#/components/schemas/JournalEvent' } },
            },
          },
        },
      },
    },
    '400': problem('`since` is neither a Go duration nor an RFC 3339 time.'),
    '401': UNAUTHORIZED,
    '404': problem(
      'No event of this request since `since` (unknown, older, EVENTS=off or failures), or the request was sent with another API key.',
    ),
    '429': {
      ...problem(
        'This API key already runs its share of journal lookups on this sync-gateway (`code: rate_limited`, EVENTS_MAX_LOOKUPS_PER_KEY). Retry later.',
      ),
      headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
    },
    '503': {
      ...problem('Kafka did not answer the journal lookup in time. Retry later.'),
      headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
    },
  },
};

const CANCELLED: Json = {
  type: 'object',
  required: ['requestId', 'client', 'by', 'at', 'first'],
  properties: {
    requestId: { type: 'string' },
    client: {
      type: ['string', 'null'],
      description: 'Whose request: this API key’s name (null with AUTH=off).',
    },
    by: { type: 'string', description: 'Who cancelled it first, e.g. `client:billing`.' },
    at: { type: 'string', description: 'When the first cancel was recorded (RFC 3339).' },
    first: { type: 'boolean', description: 'False when the request had been cancelled already.' },
  },
};

const DELETE_REQUEST: Json = {
  operationId: 'cancelRequest',
  summary: 'Cancel a request',
  description:
    'Takes back this API key’s own request of that id (requestIds are per client: another key’s request of the same id is never touched). The cancel is recorded at once; the request’s one result follows on `out` (and GET /requests/{id}): status 499 with `meta.error.code` `cancelled` and `meta.cancelled` {by, at}, whether it waited in the queue, behind an ordered partition’s head, for a retry or in the outbox (then it is answered now, not when it was due). An attempt already in flight finishes and its outcome stands when final; no further attempt starts. An id this API key never sent is answered 404 and nothing is recorded (known: accepted over HTTP within QUEUE_DEDUP_WINDOW, cancelled already, or waiting in the outbox; another key’s request of the same id is answered 404 alike). A requestId reused for a request sent after the cancel is not cancelled. Served by the ingress.',
  parameters: [
    { name: 'id', in: 'path', required: true, description: 'meta.requestId', schema: { type: 'string' } },
  ],
  responses: {
    '202': {
      description: 'The cancel is recorded (asking again answers the first one).',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Cancelled' } } },
    },
    '400': problem('The id is not a requestId (1 to 256 printable characters).'),
    '401': UNAUTHORIZED,
    '404': problem('No request of this API key has that id (nothing was recorded).'),
    '503': {
      ...problem('Redis or PostgreSQL did not answer: nothing was recorded. Retry later.'),
      headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
    },
  },
};

let cached: Json | undefined;

export function openApiDocument(): Json {
  cached ??= {
    openapi: '3.1.0',
    info: {
      title: 'Requester',
      version: '1',
      description:
        'Outgoing HTTP requests on behalf of other services: submit a request, get its result on Kafka `out` or, in sync mode, in the HTTP reply.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    security: [{ apiKey: [] }],
    paths: {
      '/request': { post: POST_REQUEST },
      '/requests/{id}': { get: GET_REQUEST, delete: DELETE_REQUEST },
      '/requests/{id}/events': { get: GET_EVENTS },
    },
    components: {
      schemas: {
        ...openApiComponents().schemas,
        Problem: PROBLEM,
        Accepted: ACCEPTED,
        Pending: PENDING,
        Cancelled: CANCELLED,
      },
      securitySchemes: { apiKey: API_KEY_SCHEME },
    },
  };
  return cached;
}
