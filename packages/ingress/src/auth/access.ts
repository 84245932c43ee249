import type { LimiterSpec, RequestEnvelope } from '@requester/shared/contract';
import { counter } from '@requester/shared/metrics';
import type { KeyScopes } from '../keys/index.ts';

/**
 * Access control of the HTTP API (AUTH=on): who is calling (an API key in `Authorization:
 * Bearer`), what that key may ask for (target hosts, sync calls, far scheduling, a rate, a body
 * size), and which results it may read (those of its own requests). Everything is decided here,
 * before anything is written to Kafka; the key's name then travels as `meta.client`.
 */

/** An authenticated caller: the key's id (its rate quota) and name (its requests and results). */
export interface Caller {
  keyId: string;
  name: string;
  scopes: KeyScopes;
  limiter?: LimiterSpec;
}

/** Why a call is refused; rendered by the API as an RFC 9457 problem. */
export interface Refusal {
  status: 400 | 401 | 403 | 429 | 503;
  code: 'invalid_request' | 'unauthorized' | 'forbidden' | 'rate_limited' | 'dependency_unavailable';
  detail: string;
  headers?: Record<string, string>;
  issues?: Array<{ path: string; message: string }>;
}

export type Admission = { ok: true; envelope: RequestEnvelope } | { ok: false; refusal: Refusal };

export interface Access {
  /** The caller of `authorization` (the header's value), or why it is refused; undefined = AUTH=off. */
  identify(authorization: string | undefined): Promise<Caller | Refusal | undefined>;
  /**
   * The envelope with `meta.client` (and `withinHorizon` for a key without the `schedule` scope)
   * set, once the caller's scopes allow it (its rate was taken before the body was read). `written` is the body as the caller sent it
   * (before defaults): a scope refuses what the caller asked for, not what a default brings.
   */
  admit(caller: Caller | undefined, envelope: RequestEnvelope, written?: unknown): Promise<Admission>;
  /** Why the caller may not wait for results (GET /requests/{id}?wait=, a long-poll), if it may not. */
  mayNotWait(caller: Caller | undefined): Refusal | undefined;
  /**
   * Takes one call from the caller's rate (its key's `--rate`), or says why not (429, or 503 when
   * Redis cannot tell). Asked before the body is read: a key over its rate costs no body bytes.
   */
  takeRate(caller: Caller | undefined): Promise<Refusal | undefined>;
  /** The body limit for this caller: its key's, when below the server's. */
  bodyLimit(caller: Caller | undefined, serverMax: number): number;
  /** Whether the caller may read this result (raw JSON from `out`). */
  mayRead(caller: Caller | undefined, resultJson: string): boolean;
  /** Whether the caller may read what belongs to `client` (a request's `meta.client`). */
  mayReadClient(caller: Caller | undefined, client: string | undefined): boolean;
}

/** A problem of a request, by field. */
export type Issue = { path: string; message: string };

export const decisions = counter(
  'auth_decisions_total',
  'HTTP API access decisions, by client (API key name) and outcome',
  ['client', 'outcome'],
);

/** `withinHorizon` is the service's to set (from the key), never the caller's. */
export function withoutMark(envelope: RequestEnvelope): RequestEnvelope {
  const { withinHorizon: _mark, ...rest } = envelope;
  return rest;
}
