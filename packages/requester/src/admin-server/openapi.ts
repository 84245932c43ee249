import { ADMIN_FEATURES } from '../ops/index.ts';
import type { OpenApiPaths } from './http.ts';

/**
 * The OpenAPI document of the admin API (`GET /admin/openapi.json` on the admin port). Kept apart
 * from the public API's document (packages/ingress/src/openapi): another port, another audience,
 * other keys (an admin scope).
 */
const OPERATIONS: OpenApiPaths = {
  '/admin/api/whoami': {
    get: { summary: 'The operator of this key: name and admin scope' },
    post: undefined,
  },
  // Each feature's routes (ops/<feature>/api.ts), in the order of ops/index.ts.
  ...Object.assign({}, ...ADMIN_FEATURES.map((f) => f.api?.paths ?? {})),
};

const REVEAL_PARAMETER = {
  name: 'reveal',
  in: 'query',
  required: false,
  schema: { type: 'boolean', default: false },
  description:
    'Show the requests in full. By default credential headers and parameters, URL userinfo, bodies and ' +
    'proxyData are hidden; revealing them needs a write key as Bearer (not the UI session cookie) and is ' +
    'journaled (admin_action secrets.reveal).',
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
          ...(op.reveal
            ? {
                '403': {
                  description: 'reveal=true with a read-only admin key, or with the UI session cookie',
                },
              }
            : {}),
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
