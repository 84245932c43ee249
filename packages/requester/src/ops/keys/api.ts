import type { AdminScope, CreateKey } from '@requester/ingress';
import { durationToMs, UsageError } from '@requester/shared';
import { html } from 'hono/html';
import { type AdminContext, type Body, bodyOf, stringOf } from '../../admin-server/http.ts';
import type { ApiFace } from '../faces.ts';
import { createKey, listKeys, revokeKey, rotateKey } from './index.ts';

const KEY = { key: { type: 'string', description: 'the key id or name' } };

/**
 * `GET /admin/api/keys` (read key), `POST /admin/api/keys/create|revoke|rotate` (write key): the
 * operations of ./index.ts, each recorded by it. The token of `create` and `rotate` is in their
 * answer, once; it is stored nowhere and never logged.
 */
export const api: ApiFace = {
  paths: {
    '/admin/api/keys': {
      get: {
        summary:
          'API keys: id, name, scopes (hosts, rate, sync, schedule, admin, kafkaEntry, credentials, weight, …) and times, never a secret (requester keys list); all=true: revoked ones too',
        params: ['all'],
      },
      post: undefined,
    },
    '/admin/api/keys/create': {
      get: undefined,
      post: {
        summary:
          'Create an API key (requester keys create): the answer holds its token, shown this once. hosts and credentials: comma-separated; rate: 200/s; deadline: the default start-by deadline of its requests, a duration (5m)',
        write: true,
        body: {
          name: { type: 'string' },
          hosts: { type: 'string' },
          rate: { type: 'string' },
          sync: { type: 'boolean' },
          schedule: { type: 'boolean' },
          maxBodyBytes: { type: 'integer' },
          admin: { type: 'string', enum: ['read', 'write'] },
          kafkaEntry: { type: 'boolean' },
          virtualHosts: { type: 'boolean' },
          credentials: { type: 'string' },
          destinations: { type: 'string' },
          weight: { type: 'integer' },
          maxInFlight: { type: 'integer' },
          deadline: { type: 'string' },
        },
      },
    },
    '/admin/api/keys/revoke': {
      get: undefined,
      post: {
        summary: 'Revoke an API key: ingresses refuse it within AUTH_CACHE_TTL (requester keys revoke)',
        write: true,
        body: KEY,
      },
    },
    '/admin/api/keys/rotate': {
      get: undefined,
      post: {
        summary:
          'A new secret for an API key (requester keys rotate): the answer holds the new token, shown this once; the old one works for grace (a duration, default 24h), until oldValidUntil',
        write: true,
        body: { ...KEY, grace: { type: 'string' } },
      },
    },
  },
  routes(app, console) {
    app.get('/admin/api/keys', async (c) =>
      c.json(await listKeys(await console.keysParts().then((p) => p.store), c.req.query('all') === 'true')),
    );
    app.post('/admin/api/keys/create', async (c) => {
      const issued = await createKey(
        await console.keysParts(),
        c.get('operator').name,
        specOf(await bodyOf(c)),
      );
      return tokenAnswer(c, issued, `Created key ${issued.name} (${issued.id}).`);
    });
    app.post('/admin/api/keys/revoke', async (c) => {
      const body = await bodyOf(c);
      const result = await revokeKey(await console.keysParts(), c.get('operator').name, text(body.key) ?? '');
      if (!c.req.header('hx-request')) return c.json(result);
      c.header('HX-Trigger', 'refresh');
      return c.html(
        html`<div class="flash">Revoked ${result.revoked}: ingresses refuse it within AUTH_CACHE_TTL.</div>`,
      );
    });
    app.post('/admin/api/keys/rotate', async (c) => {
      const body = await bodyOf(c);
      const grace = text(body.grace) ?? '24h';
      const issued = await rotateKey(
        await console.keysParts(),
        c.get('operator').name,
        text(body.key) ?? '',
        graceOf(grace),
      );
      return tokenAnswer(
        c,
        issued,
        `Rotated key ${issued.name} (${issued.id}); the old secret works until ${issued.oldValidUntil ?? 'now'}.`,
      );
    });
  },
};

/** The token, once: JSON for the API, for htmx a flash that holds it (never logged, never stored). */
function tokenAnswer(c: AdminContext, issued: { id: string; name: string; token: string }, message: string) {
  if (!c.req.header('hx-request')) return c.json(issued);
  c.header('HX-Trigger', 'refresh');
  return c.html(
    html`<div class="flash token">${message} Its token, shown this once (copy it now):<br><code id="new-token">${issued.token}</code></div>`,
  );
}

function text(value: unknown): string | undefined {
  return stringOf(value)?.trim() || undefined;
}

function flag(value: unknown): boolean {
  return value === true || value === 'on' || value === 'true';
}

function whole(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new UsageError(`${field} must be a whole number, got ${String(value)}`);
  return n;
}

function listOf(value: unknown): string[] | undefined {
  const items = (Array.isArray(value) ? value.join(',') : (text(value) ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return items.length ? items : undefined;
}

function specOf(body: Body): CreateKey {
  const name = text(body.name);
  if (!name) throw new UsageError('name is required (the client name of its requests)');
  const admin = text(body.admin);
  if (admin !== undefined && admin !== 'read' && admin !== 'write')
    throw new UsageError(`admin must be read or write, got ${admin}`);
  const hosts = listOf(body.hosts);
  const credentials = listOf(body.credentials);
  const destinations = listOf(body.destinations);
  const rate = text(body.rate);
  const maxBodyBytes = whole(body.maxBodyBytes, 'maxBodyBytes');
  const weight = whole(body.weight, 'weight');
  const maxInFlight = whole(body.maxInFlight, 'maxInFlight');
  const deadline = text(body.deadline);
  return {
    name,
    sync: flag(body.sync),
    schedule: flag(body.schedule),
    kafkaEntry: flag(body.kafkaEntry),
    ...(flag(body.virtualHosts) ? { virtualHosts: true } : {}),
    ...(hosts ? { hosts } : {}),
    ...(credentials ? { credentials } : {}),
    ...(destinations ? { destinations } : {}),
    ...(rate ? { rate } : {}),
    ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
    ...(weight === undefined ? {} : { weight }),
    ...(maxInFlight === undefined ? {} : { maxInFlight }),
    ...(deadline ? { deadline } : {}),
    ...(admin ? { admin: admin as AdminScope } : {}),
  };
}

function graceOf(text: string): number {
  try {
    return durationToMs(text);
  } catch (err) {
    throw new UsageError(`grace: ${err instanceof Error ? err.message : String(err)}`);
  }
}
