/**
 * The API's refusals: RFC 9457 problem bodies, with the headers each kind of refusal carries.
 *
 * @module
 */

import type { ErrorCode } from '@requester/shared/errors';
import type { Context } from 'hono';
import type { Refusal } from '../auth/index.ts';
import type { CredentialRefusal } from '../credentials/index.ts';
import type { Env } from './context.ts';
import type { ApiSettings } from './settings.ts';

/** A 429 for a key that holds its share of something already (the instance still has room). */
export function overShare(c: Context<Env>, detail: string): Response {
  c.header('Retry-After', '1');
  return problem(c, 429, 'rate_limited', detail);
}

export function notServed(c: Context<Env>, route: string, role: string): Response {
  return problem(
    c,
    404,
    'not_found',
    `${route} is served by the ${role} role, which does not run in this process`,
  );
}

/** A dependency (Kafka, Redis) did not answer: 503, with when to try again. */
export function unavailable(c: Context<Env>, settings: ApiSettings, detail: string): Response {
  c.header('Retry-After', String(settings.unavailableRetryAfterSeconds ?? 5));
  return problem(c, 503, 'dependency_unavailable', detail);
}

export function refuse(c: Context<Env>, refusal: Refusal | CredentialRefusal): Response {
  for (const [name, value] of Object.entries(refusal.headers ?? {})) c.header(name, value);
  return problem(c, refusal.status, refusal.code, refusal.detail, refusal.issues);
}

/** An RFC 9457 problem body; `code` is the stable machine code of RequesterError. */
export function problem(
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
