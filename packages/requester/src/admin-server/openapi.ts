/**
 * The OpenAPI document of the admin API (`GET /admin/openapi.json` on the admin port). Kept apart
 * from the public API's document (packages/ingress/src/openapi): another port, another audience,
 * other keys (an admin scope).
 */
import { CANCEL_OPERATION } from '../ops/cancel/api.ts';
import { PAUSE_OPERATIONS } from '../ops/pause/api.ts';
import { TASKS_OPERATIONS } from '../ops/tasks/api.ts';

type Op = {
  summary: string;
  write?: boolean;
  /** Shows requests: secrets hidden unless `reveal=true` (a write key's journaled action). */
  reveal?: boolean;
  params?: string[];
  body?: Record<string, unknown>;
  pathId?: boolean;
};

const OPERATIONS: Record<string, Record<'get' | 'post', Op | undefined>> = {
  '/admin/api/whoami': {
    get: { summary: 'The operator of this key: name and admin scope' },
    post: undefined,
  },
  '/admin/api/overview': {
    get: {
      summary: 'Queue depth per shard, partitions by state, in flight, outbox, breakers, live throughput',
    },
    post: undefined,
  },
  '/admin/api/partitions': {
    get: {
      summary: 'The heaviest and the most held-back partitions, with their head task and why it waits',
      params: ['limit'],
      reveal: true,
    },
    post: undefined,
  },
  '/admin/api/requests/{id}': {
    get: {
      summary:
        "A request's result (if this process's sync-gateway holds it) and its dead letters; requestIds are per client: `client` names whose (none: a request without meta.client; dead letters of every client)",
      pathId: true,
      params: ['client'],
      reveal: true,
    },
    post: undefined,
  },
  '/admin/api/requests/{id}/events': {
    get: { summary: "A request's journal timeline; {enabled: false} when no journal is wired", pathId: true },
    post: undefined,
  },
  '/admin/api/dlq': {
    get: {
      summary: 'Dead letters, newest first, without those marked handled (requester dlq list)',
      params: ['requestId', 'since', 'until', 'origin', 'errorCode', 'client', 'limit'],
      reveal: true,
    },
    post: undefined,
  },
  '/admin/api/dlq/replay': {
    get: undefined,
    post: {
      summary: 'Replay the selected dead letters to in (requester dlq replay); needs a write key',
      write: true,
      body: {
        requestIds: { type: 'array', items: { type: 'string' } },
        refs: {
          type: 'array',
          items: { type: 'string' },
          description: 'DLQ positions topic/partition/offset',
        },
        since: { type: 'string', format: 'date-time' },
        until: { type: 'string', format: 'date-time' },
        origin: { type: 'string' },
        errorCode: { type: 'string' },
        client: { type: 'string' },
        force: { type: 'boolean' },
      },
    },
  },
  '/admin/api/dlq/delete': {
    get: undefined,
    post: {
      summary: 'Mark dead letters as handled (requester dlq delete): left out of lists from then on',
      write: true,
      body: { refs: { type: 'array', items: { type: 'string' } } },
    },
  },
  '/admin/api/breakers': {
    get: { summary: 'Open and half-open breakers (requester breakers list)', params: ['limit'] },
    post: undefined,
  },
  '/admin/api/breakers/show': {
    get: { summary: 'The breaker of one origin (requester breakers show)', params: ['origin'] },
    post: undefined,
  },
  '/admin/api/breakers/reset': {
    get: undefined,
    post: {
      summary: 'Close the breaker of an origin (requester breakers reset)',
      write: true,
      body: { origin: { type: 'string' } },
    },
  },
  '/admin/api/requests/{id}/cancel': { get: undefined, post: CANCEL_OPERATION },
  ...PAUSE_OPERATIONS,
  ...TASKS_OPERATIONS,
  '/admin/api/limiters': {
    get: {
      summary:
        "The windows of a limiter key (requester limiter show); `client`: whose key (a request's limiter key is its client's, unless SHARED_LIMITER_KEYS declares it shared)",
      params: ['key', 'client', 'rate', 'apiKey'],
    },
    post: undefined,
  },
};

const REVEAL_PARAMETER = {
  name: 'reveal',
  in: 'query',
  required: false,
  schema: { type: 'boolean', default: false },
  description:
    'Show the requests in full. By default credential headers and parameters, URL userinfo, bodies and ' +
    'proxyData are hidden; revealing them needs a write key and is journaled (admin_action secrets.reveal).',
};

export function adminOpenApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [path, methods] of Object.entries(OPERATIONS)) {
    paths[path] = {};
    for (const method of ['get', 'post'] as const) {
      const op = methods[method];
      if (!op) continue;
      const parameters = [
        ...(op.pathId ? [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }] : []),
        ...(op.params ?? []).map((name) => ({
          name,
          in: 'query',
          required: false,
          schema: { type: 'string' },
        })),
        ...(op.reveal ? [REVEAL_PARAMETER] : []),
      ];
      paths[path][method] = {
        summary: op.summary,
        ...(parameters.length ? { parameters } : {}),
        ...(op.body
          ? {
              requestBody: {
                content: { 'application/json': { schema: { type: 'object', properties: op.body } } },
              },
            }
          : {}),
        responses: {
          '200': { description: 'JSON' },
          '400': { description: 'a bad parameter (named)' },
          '401': { description: 'no API key with an admin scope' },
          ...(op.write ? { '403': { description: 'a read-only admin key, or a cross-site request' } } : {}),
          ...(op.reveal ? { '403': { description: 'reveal=true with a read-only admin key' } } : {}),
          '503': { description: 'a dependency (Redis, Kafka, PostgreSQL) does not answer' },
        },
      };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Requester admin API',
      version: '1',
      description:
        'The admin port: operator views and actions. Authorization: Bearer <API key with an admin scope> ' +
        '(requester keys create --admin read|write); read keys see, write keys act. Views hide the secrets ' +
        'of requests unless a write key asks reveal=true. Every action (a reveal included) is logged with ' +
        'the key name, counted in requester_admin_actions_total and journaled on the requests it named.',
    },
    components: { securitySchemes: { adminKey: { type: 'http', scheme: 'bearer' } } },
    security: [{ adminKey: [] }],
    paths,
  };
}
