import { destinationSubject, lookupSince, UsageError } from '@requester/shared';
import { destinationSpecJsonSchema } from '@requester/shared/contract';
import type { AdminConsole } from '../../admin-server/console.ts';
import { type AdminContext, answer, bodyOf as readBody } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import {
  createDestination,
  deleteDestination,
  listDestinations,
  showDestination,
  specFromForm,
  updateDestination,
} from './index.ts';
import { destinationStatus } from './status.ts';

/**
 * The admin API of destinations (`/admin/api/destinations…` on the admin port; a POST needs a
 * write key). Bodies are JSON: `{name, spec}` to create (the spec: baseUrl, headers, credentials,
 * limiter {algorithm, rates}, retry, maxBodyBytes, breaker, pacing…: destinationSpecSchema, in the
 * OpenAPI document as JSON Schema), `{name, spec}` to update (the fields given laid
 * over the current version: a new version), `{name}` to delete; or the operator UI's form (flat
 * fields: specFromForm).
 */
export const api: ApiFace = {
  paths: {
    '/admin/api/destinations': {
      get: { summary: 'Destinations at their current version (requester destinations list)' },
      post: undefined,
    },
    '/admin/api/destinations/{name}': {
      get: {
        summary: 'A destination: its current version and every version (requester destinations show)',
        params: ['name'],
      },
      post: undefined,
    },
    '/admin/api/destinations/{name}/status': {
      get: {
        summary:
          "How a destination is doing (requester destinations status): its origin's breaker, calls in flight, pace, pause and calls of the last minutes, and its quota's windows",
        params: ['name'],
      },
      post: undefined,
    },
    '/admin/api/destinations/{name}/history': {
      get: {
        summary:
          "A destination's operator actions from the task journal (requester destinations history): each create, update (the version made), pause, resume, recover and delete, with its actor and outcome; `since` a duration back (720h) or RFC 3339 time, default the last hour; {enabled: false} when no journal is wired",
        params: ['name', 'since'],
      },
      post: undefined,
    },
    '/admin/api/destinations/create': {
      get: undefined,
      post: {
        summary: 'Create a destination, version 1 (requester destinations create); needs a write key',
        write: true,
        body: { name: { type: 'string' }, spec: destinationSpecJsonSchema() },
      },
    },
    '/admin/api/destinations/update': {
      get: undefined,
      post: {
        summary:
          'A new version of a destination, the fields of spec over the current ones (requester destinations update); needs a write key',
        write: true,
        body: { name: { type: 'string' }, spec: destinationSpecJsonSchema() },
      },
    },
    '/admin/api/destinations/delete': {
      get: undefined,
      post: {
        summary:
          'Delete a destination: its requests are refused (requester destinations delete); needs a write key',
        write: true,
        body: { name: { type: 'string' } },
      },
    },
  },
  routes(app, console) {
    app.get('/admin/api/destinations', async (c) =>
      c.json(await listDestinations(await console.destinationStore())),
    );
    app.get('/admin/api/destinations/:name', async (c) =>
      c.json(await showDestination(await console.destinationStore(), c.req.param('name'))),
    );
    app.get('/admin/api/destinations/:name/status', async (c) => {
      const { current } = await showDestination(await console.destinationStore(), c.req.param('name'));
      return c.json(await destinationStatus(console.originParts(), current));
    });
    app.get('/admin/api/destinations/:name/history', async (c) => {
      if (!console.events) return c.json({ enabled: false, events: [] });
      const since = c.req.query('since');
      const sinceMs = since ? lookupSince(since) : undefined;
      if (typeof sinceMs === 'string') throw new UsageError(`since: ${sinceMs}`);
      const events = await console.events(destinationSubject(c.req.param('name')), sinceMs);
      return c.json({ enabled: true, events });
    });
    app.post('/admin/api/destinations/create', async (c) => {
      const { name, spec } = await bodyOf(c, true);
      const view = await failedRecorded(c, console, 'destinations.create', name, async () =>
        createDestination(await console.destinationStore(), name, spec, c.get('operator').name),
      );
      await console.record(c.get('operator'), 'destinations.create', {
        destination: name,
        version: view.version,
      });
      return answer(c, view, `Created ${name}, version ${view.version}.`);
    });
    app.post('/admin/api/destinations/update', async (c) => {
      const { name, spec } = await bodyOf(c, true);
      const view = await failedRecorded(c, console, 'destinations.update', name, async () =>
        updateDestination(await console.destinationStore(), name, spec, c.get('operator').name),
      );
      await console.record(c.get('operator'), 'destinations.update', {
        destination: name,
        version: view.version,
      });
      return answer(c, view, `Updated ${name} to version ${view.version}.`);
    });
    app.post('/admin/api/destinations/delete', async (c) => {
      const { name } = await bodyOf(c, false);
      const result = await failedRecorded(c, console, 'destinations.delete', name, async () =>
        deleteDestination(await console.destinationStore(), name),
      );
      await console.record(c.get('operator'), 'destinations.delete', { destination: name });
      return answer(c, result, `Deleted ${name}: its requests are refused.`);
    });
  },
};

/** A change refused or failed is recorded as such (outcome `failed`), then answered as before. */
async function failedRecorded<T>(
  c: AdminContext,
  console: AdminConsole,
  action: string,
  name: string,
  run: () => Promise<T>,
): Promise<T> {
  try {
    return await run();
  } catch (err) {
    await console.record(c.get('operator'), action, { destination: name }, 'failed');
    throw err;
  }
}

async function bodyOf(
  c: AdminContext,
  withSpec: boolean,
): Promise<{ name: string; spec: Record<string, unknown> }> {
  const json = (c.req.header('content-type') ?? '').startsWith('application/json');
  const body = json
    ? ((await c.req.json().catch(() => undefined)) as Record<string, unknown> | undefined)
    : ((await readBody(c)) as Record<string, unknown>);
  const name = typeof body?.name === 'string' ? body.name.trim() : '';
  if (name === '') throw new UsageError('name is required');
  if (!withSpec) return { name, spec: {} };
  // The UI's form: flat fields, as the CLI's options. JSON: the spec under `spec`.
  if (!json) return { name, spec: specFromForm(body as Record<string, unknown>) };
  const spec = body?.spec;
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec))
    throw new UsageError(
      'spec is required: {baseUrl, headers?, credentials?, limiter?, retry?, maxBodyBytes?, breaker?, pacing?, …}',
    );
  return { name, spec: spec as Record<string, unknown> };
}
