import { longestQuotaPeriodMs, longestWaitMs, RateLimiter } from '@requester/policies';
import type { LimiterSpec, RequestEnvelope } from '@requester/shared/contract';
import { hostHeaderMatches, hostHeaderOf } from '@requester/shared/credentials';
import { counter } from '@requester/shared/metrics';
import type { RoleContext } from '@requester/shared/role';
import { durationToMs, formatDuration, tryParseRfc3339 } from '@requester/shared/time';
import type { Context, MiddlewareHandler } from 'hono';
import {
  hashSecret,
  type KeyRecord,
  type KeyScopes,
  KeyStore,
  parseRate,
  parseToken,
  secretHashAccepted,
  splitHostPattern,
} from '../keys/index.ts';
import { requestHeader } from '../request/index.ts';

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

const decisions = counter(
  'auth_decisions_total',
  'HTTP API access decisions, by client (API key name) and outcome',
  ['client', 'outcome'],
);

/** The Hono middleware: identifies the caller (`c.var.caller`) or answers the refusal. */
export function authenticate<E extends { Variables: { caller?: Caller } }>(
  access: Access,
  render: (c: Context<E>, refusal: Refusal) => Response,
): MiddlewareHandler<E> {
  return async (c, next) => {
    const identified = await access.identify(requestHeader(c, 'authorization'));
    if (identified && 'status' in identified) {
      decisions.inc({ client: '', outcome: identified.code });
      return render(c, identified);
    }
    // The API's request log reads the caller from here (callerBindings): its lines name the client.
    if (identified) c.set('caller', identified);
    await next();
  };
}

/** The log bindings of a caller (merged into the role's logger once the role is known). */
export function callerBindings(caller: Caller | undefined): { client?: string } {
  return caller ? { client: caller.name } : {};
}

const CLIENT_IS_OURS: Refusal = {
  status: 400,
  code: 'invalid_request',
  detail: 'meta.client: set by Requester from the API key; leave it out',
  issues: [{ path: 'meta.client', message: 'set by Requester from the API key; leave it out' }],
};

/**
 * AUTH=off: every caller is let in, reads every result, and no request carries a client. Its
 * records are not signed, so they are anonymous ones to the router: a credential may be named
 * only when `anonymousCredentials` (KAFKA_ANONYMOUS_CREDENTIALS) lists it, refused here (403)
 * rather than answered forbidden later. Undefined: no such check (tests of the API alone).
 */
export function openAccess(anonymousCredentials?: ReadonlySet<string>): Access {
  return {
    identify: async () => undefined,
    admit: async (_caller, envelope) => {
      if (envelope.meta.client !== undefined) return { ok: false, refusal: CLIENT_IS_OURS };
      const issues = anonymousCredentials ? anonymousIssues(envelope, anonymousCredentials) : [];
      if (issues.length > 0) return { ok: false, refusal: forbidden(issues) };
      return { ok: true, envelope: withoutMark(envelope) };
    },
    mayNotWait: () => undefined,
    takeRate: async () => undefined,
    bodyLimit: (_caller, serverMax) => serverMax,
    mayRead: () => true,
    mayReadClient: () => true,
  };
}

function anonymousIssues(envelope: RequestEnvelope, allowed: ReadonlySet<string>): Issue[] {
  const issues: Issue[] = [];
  for (const [path, name] of [
    ['meta.credentials', envelope.meta.credentials],
    ['meta.signing.keyId', envelope.meta.signing?.keyId],
  ] as const)
    if (name !== undefined && !allowed.has(name))
      issues.push({
        path,
        message: `with AUTH=off only the credentials of KAFKA_ANONYMOUS_CREDENTIALS may be used (${name} is not among them)`,
      });
  return issues;
}

/** `withinHorizon` is the service's to set (from the key), never the caller's. */
function withoutMark(envelope: RequestEnvelope): RequestEnvelope {
  const { withinHorizon: _mark, ...rest } = envelope;
  return rest;
}

/** A refusal of what the key's scopes do not allow, naming each field. */
function forbidden(issues: Array<{ path: string; message: string }>): Refusal {
  return {
    status: 403,
    code: 'forbidden',
    detail: issues.map((issue) => `${issue.path}: ${issue.message}`).join('; '),
    issues,
  };
}

export interface KeyAccessOptions {
  /** The key with this id, revoked or not (the store's `find`). */
  find(id: string): Promise<KeyRecord | undefined>;
  /** How long a looked-up key (or its absence) is trusted: the bound on a revocation's delay. */
  cacheTtlMs: number;
  /** REDIS_HORIZON: a request scheduled further ahead needs the `schedule` scope. */
  horizonMs: number;
  /** The per-key rate limiter, made on first use (only keys with a rate need Redis). */
  limiter(): Pick<RateLimiter, 'take'>;
  now?: () => number;
  /** Most keys (and unknown ids) remembered; the oldest are forgotten first. */
  maxCached?: number;
}

const UNAUTHORIZED_HEADERS = { 'WWW-Authenticate': 'Bearer realm="requester"' };
const MISSING: Refusal = {
  status: 401,
  code: 'unauthorized',
  detail: 'an API key is required: send Authorization: Bearer rqk_… (see `requester keys create`)',
  headers: UNAUTHORIZED_HEADERS,
};
/** One answer for a malformed, unknown, wrong, revoked or expired key: none tells which. */
const INVALID: Refusal = {
  status: 401,
  code: 'unauthorized',
  detail: 'the API key is not valid (unknown, revoked, or replaced by a rotation)',
  headers: { 'WWW-Authenticate': 'Bearer realm="requester", error="invalid_token"' },
};
const KEYS_UNAVAILABLE: Refusal = {
  status: 503,
  code: 'dependency_unavailable',
  detail: 'API keys cannot be checked now (PostgreSQL does not answer); retry later',
  headers: { 'Retry-After': '5' },
};

interface Cached {
  record: KeyRecord | undefined;
  expiresAt: number;
  /** Hashes (hex) of the secrets this very read of the key refused: presented again, no new read. */
  refused?: Set<string>;
}

/** Refused secrets remembered per key read; past it, a new wrong secret is refused without one. */
const MAX_REFUSED_REMEMBERED = 16;

/** Whether a secret this read refuses is worth reading the key again for: not one refused by it already. */
function mayReadAgain(entry: Cached, presented: Buffer): boolean {
  const refused = entry.refused;
  return !refused || (refused.size < MAX_REFUSED_REMEMBERED && !refused.has(presented.toString('hex')));
}

/** Whether the key read in `entry` refuses a secret (by its hash): wrong, or rotated out. */
function refuses(entry: Cached, presented: Buffer, now: number): boolean {
  return (
    entry.record !== undefined && !entry.record.revokedAt && !secretHashAccepted(entry.record, presented, now)
  );
}

/** AUTH=on: API keys from the store, looked up at most once per AUTH_CACHE_TTL per key and process. */
export class KeyAccess implements Access {
  readonly #options: KeyAccessOptions;
  readonly #now: () => number;
  readonly #cache = new Map<string, Cached>();
  readonly #lookups = new Map<string, Promise<KeyRecord | undefined>>();

  constructor(options: KeyAccessOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  async identify(authorization: string | undefined): Promise<Caller | Refusal> {
    const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
    if (!match) return MISSING;
    const token = parseToken(match[1] as string);
    if (!token) return INVALID;
    const presented = hashSecret(token.secret);
    let entry: Cached;
    try {
      let cached: boolean;
      ({ entry, cached } = await this.#record(token.id));
      // A remembered key that refuses this secret may have been rotated since it was read: its new
      // token must work at once, as in a process that had not read the key yet. So the key is read
      // again, once per secret it refuses: a wrong secret repeated costs no more reads than before.
      if (cached && refuses(entry, presented, this.#now()) && mayReadAgain(entry, presented))
        ({ entry } = await this.#record(token.id, true));
    } catch {
      return KEYS_UNAVAILABLE;
    }
    const { record } = entry;
    if (!record || record.revokedAt) return INVALID;
    if (refuses(entry, presented, this.#now())) {
      entry.refused ??= new Set();
      if (entry.refused.size < MAX_REFUSED_REMEMBERED) entry.refused.add(presented.toString('hex'));
      return INVALID;
    }
    return callerOf(record);
  }

  async admit(caller: Caller | undefined, envelope: RequestEnvelope, written?: unknown): Promise<Admission> {
    if (envelope.meta.client !== undefined) return { ok: false, refusal: CLIENT_IS_OURS };
    if (!caller) return { ok: false, refusal: MISSING };
    const foreignHost = caller.scopes.virtualHosts ? undefined : foreignHostHeader(envelope);
    if (foreignHost) {
      decisions.inc({ client: caller.name, outcome: 'invalid_request' });
      return { ok: false, refusal: foreignHost };
    }
    const outOfScope = this.#outOfScope(caller, envelope, written);
    if (outOfScope.length > 0) {
      decisions.inc({ client: caller.name, outcome: 'forbidden' });
      return { ok: false, refusal: forbidden(outOfScope) };
    }
    decisions.inc({ client: caller.name, outcome: 'accepted' });
    const meta = { ...envelope.meta, client: caller.name };
    // Without `schedule`, the executor caps every wait of the task at REDIS_HORIZON.
    const mark = caller.scopes.schedule ? {} : { withinHorizon: true as const };
    return { ok: true, envelope: { ...withoutMark(envelope), meta, ...mark } };
  }

  mayNotWait(caller: Caller | undefined): Refusal | undefined {
    if (!caller || caller.scopes.sync) return undefined;
    decisions.inc({ client: caller.name, outcome: 'forbidden' });
    // A long-poll gives what a sync call gives: the scope covers both (README, Access control).
    return forbidden([
      { path: 'wait', message: 'this API key may not wait for results (the sync scope); ask without wait' },
    ]);
  }

  bodyLimit(caller: Caller | undefined, serverMax: number): number {
    return Math.min(serverMax, caller?.scopes.maxBodyBytes ?? serverMax);
  }

  /** A result is its key's: another key (or a result without a client) reads nothing. */
  mayRead(caller: Caller | undefined, resultJson: string): boolean {
    return this.mayReadClient(caller, clientOf(resultJson));
  }

  mayReadClient(caller: Caller | undefined, client: string | undefined): boolean {
    return caller !== undefined && client === caller.name;
  }

  #outOfScope(caller: Caller, envelope: RequestEnvelope, written: unknown): Issue[] {
    const { scopes } = caller;
    const issues: Issue[] = [];
    const destination = envelope.meta.destination;
    if (scopes.destinations && destination === undefined)
      issues.push({
        path: 'request.uri',
        message: `this API key may call only its destinations (${scopes.destinations.join(', ')}): name one in meta.destination with a relative URI`,
      });
    if (scopes.destinations && destination !== undefined && !scopes.destinations.includes(destination))
      issues.push({
        path: 'meta.destination',
        message: `this API key may not call the destination ${destination} (its destinations scope: keys create --destinations)`,
      });
    // A destination's host is the operator's choice, not the caller's: the key's hosts do not judge it.
    if (scopes.hosts && envelope.request.uri !== '' && destination === undefined) {
      const url = new URL(envelope.request.uri);
      const host = url.hostname.toLowerCase();
      const port = url.port || DEFAULT_PORTS[url.protocol] || '';
      if (!scopes.hosts.some((pattern) => hostPortMatches(pattern, host, port)))
        issues.push({
          path: 'request.uri',
          message: `host ${host} port ${port} is not among the hosts this API key may call`,
        });
    }
    if (envelope.meta.sync && !scopes.sync)
      issues.push({ path: 'meta.sync', message: 'this API key may not make sync calls' });
    const credential = envelope.meta.credentials;
    if (credential !== undefined && !scopes.credentials?.includes(credential))
      issues.push({
        path: 'meta.credentials',
        message: `this API key may not use the credential ${credential} (its credentials scope: keys create --credentials)`,
      });
    // A signing key is a credential too (its secrets in the store): the same scope says who may use it.
    const keyId = envelope.meta.signing?.keyId;
    if (keyId !== undefined && !scopes.credentials?.includes(keyId))
      issues.push({
        path: 'meta.signing.keyId',
        message: `this API key may not sign with the key ${keyId} (its credentials scope: keys create --credentials)`,
      });
    if (!scopes.schedule) issues.push(...this.#beyondHorizon(envelope, written));
    return issues;
  }

  /**
   * What would park the task beyond REDIS_HORIZON, which a key without the `schedule` scope may
   * not do: a `scheduled` instant, a retry pause the caller wrote (`delay`, `maxDelay`), a limiter
   * window whose wait can be longer, a calendar quota (its wait lasts until its reset). What only the run tells (a default `maxDelay` reached, a
   * target's Retry-After) is capped by the executor instead (the envelope's `withinHorizon`).
   */
  #beyondHorizon(envelope: RequestEnvelope, written: unknown): Issue[] {
    const { horizonMs } = this.#options;
    const horizon = `the Redis horizon (REDIS_HORIZON, ${formatDuration(horizonMs)}): this API key lacks the schedule scope`;
    const issues: Issue[] = [];
    const scheduled = envelope.meta.scheduled ? tryParseRfc3339(envelope.meta.scheduled) : undefined;
    if (scheduled?.ok && scheduled.epochMs - this.#now() > horizonMs)
      issues.push({ path: 'meta.scheduled', message: `may not be beyond ${horizon}` });
    const retry = writtenRetry(written);
    for (const field of ['delay', 'maxDelay'] as const) {
      const asked = retry[field];
      if (asked !== undefined && durationToMs(asked) > horizonMs)
        issues.push({ path: `meta.retry.${field}`, message: `${asked} is beyond ${horizon}` });
    }
    const limiter = envelope.meta.limiter;
    limiter?.rates.forEach((rate, i) => {
      const window = { durationMs: durationToMs(rate.duration), value: rate.value };
      const longest = longestWaitMs(limiter.algorithm, window, limiter.cost);
      if (longest > horizonMs)
        issues.push({
          path: `meta.limiter.rates.${i}.duration`,
          message: `${limiter.algorithm} at ${rate.value} per ${rate.duration} can hold a call ${formatDuration(longest)}, beyond ${horizon}`,
        });
    });
    const longestQuotaMs = limiter?.quota && longestQuotaPeriodMs(limiter.quota.period);
    if (longestQuotaMs && longestQuotaMs > horizonMs)
      issues.push({
        path: 'meta.limiter.quota',
        message: `a ${limiter.quota?.period}ly quota can hold a call until its reset, up to ${formatDuration(longestQuotaMs)}, beyond ${horizon}`,
      });
    return issues;
  }

  async takeRate(caller: Caller | undefined): Promise<Refusal | undefined> {
    const limited = caller && (await this.#overRate(caller));
    if (caller && limited) decisions.inc({ client: caller.name, outcome: limited.code });
    return limited;
  }

  async #overRate(caller: Caller): Promise<Refusal | undefined> {
    if (!caller.limiter) return undefined;
    let decision: Awaited<ReturnType<RateLimiter['take']>>;
    try {
      decision = await this.#options.limiter().take(caller.limiter);
    } catch {
      return {
        ...KEYS_UNAVAILABLE,
        detail: 'the rate of this API key cannot be checked now (Redis); retry later',
      };
    }
    if (decision.allowed) return undefined;
    // Whole seconds, rounded up: a client that waits this long is admitted (if nobody else took it).
    const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
    return {
      status: 429,
      code: 'rate_limited',
      detail: `this API key may send ${caller.scopes.rate}; retry in ${seconds} s`,
      headers: { 'Retry-After': String(seconds) },
    };
  }

  /**
   * A cached lookup (`cached`: remembered from an earlier read), one query at a time per id (a
   * burst of calls with a new key makes one); `fresh` reads it again whatever is remembered.
   */
  async #record(id: string, fresh = false): Promise<{ entry: Cached; cached: boolean }> {
    const now = this.#now();
    const cached = this.#cache.get(id);
    if (!fresh && cached && cached.expiresAt > now) return { entry: cached, cached: true };
    let lookup = this.#lookups.get(id);
    if (!lookup) {
      lookup = this.#options.find(id).finally(() => this.#lookups.delete(id));
      this.#lookups.set(id, lookup);
    }
    const entry: Cached = { record: await lookup, expiresAt: now + this.#options.cacheTtlMs };
    this.#remember(id, entry);
    return { entry, cached: false };
  }

  #remember(id: string, entry: Cached): void {
    this.#cache.delete(id);
    this.#cache.set(id, entry);
    const max = this.#options.maxCached ?? 10_000;
    for (const oldest of this.#cache.keys()) {
      if (this.#cache.size <= max) break;
      this.#cache.delete(oldest);
    }
  }
}

function callerOf(record: KeyRecord): Caller {
  const scopes: KeyScopes = {
    sync: record.sync,
    schedule: record.schedule,
    kafkaEntry: record.kafkaEntry,
    ...(record.hosts ? { hosts: record.hosts } : {}),
    ...(record.rate ? { rate: record.rate } : {}),
    ...(record.maxBodyBytes === undefined ? {} : { maxBodyBytes: record.maxBodyBytes }),
    ...(record.admin ? { admin: record.admin } : {}),
    ...(record.credentials ? { credentials: record.credentials } : {}),
    ...(record.destinations ? { destinations: record.destinations } : {}),
    ...(record.virtualHosts ? { virtualHosts: true } : {}),
    ...(record.deadline ? { deadline: record.deadline } : {}),
  };
  const caller: Caller = { keyId: record.id, name: record.name, scopes };
  if (record.rate) {
    const { value, duration } = parseRate(record.rate);
    caller.limiter = { key: record.id, algorithm: 'token-bucket', rates: [{ duration, value }] };
  }
  return caller;
}

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * A `--hosts` pattern against a request's host (lower-case; an IPv6 literal keeps its brackets)
 * and port (the default one spelled out): a pattern without a port matches any port.
 */
export function hostPortMatches(pattern: string, host: string, port: string): boolean {
  const split = splitHostPattern(pattern);
  return hostMatches(split.host, host) && (split.port === undefined || split.port === port);
}

/**
 * A `Host` header naming another host than the request URI's would have the target's server route
 * the call (and whatever credential it carries) to a name the key's scope never judged: refused
 * unless the key allows virtual hosts. A wake-up (empty uri) calls nobody.
 */
function foreignHostHeader(envelope: RequestEnvelope): Refusal | undefined {
  const { uri, headers } = envelope.request;
  // A request to a destination may send no Host header at all (applyDestination refuses it).
  const host = uri === '' || envelope.meta.destination !== undefined ? undefined : hostHeaderOf(headers);
  if (host === undefined || hostHeaderMatches(host, new URL(uri))) return undefined;
  const message = `must name the request URI's host (${new URL(uri).host}); this API key may not send another (keys update --virtual-hosts)`;
  return {
    status: 400,
    code: 'invalid_request',
    detail: `request.headers.host: ${message}`,
    issues: [{ path: 'request.headers.host', message }],
  };
}

/** `*.partner.example` covers every name under partner.example (not partner.example itself). */
export function hostMatches(pattern: string, host: string): boolean {
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

type Issue = { path: string; message: string };

/** The retry pauses as the caller wrote them (the validated envelope has the defaults filled in). */
function writtenRetry(written: unknown): { delay?: string; maxDelay?: string } {
  const retry = (written as { meta?: { retry?: Record<string, unknown> } } | undefined)?.meta?.retry;
  if (typeof retry !== 'object' || retry === null) return {};
  return {
    ...(typeof retry.delay === 'string' ? { delay: retry.delay } : {}),
    ...(typeof retry.maxDelay === 'string' ? { maxDelay: retry.maxDelay } : {}),
  };
}

function clientOf(resultJson: string): string | undefined {
  try {
    const client = (JSON.parse(resultJson) as { meta?: { client?: unknown } }).meta?.client;
    return typeof client === 'string' ? client : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The access control of one HTTP server, from the configuration. AUTH=on needs PostgreSQL at
 * start (fail fast: without the keys nobody could be let in); Redis only once a key with a rate
 * calls. AUTH=off is said loudly: the API is then an open proxy for whoever reaches the port.
 */
export async function accessFromConfig(ctx: RoleContext): Promise<Access> {
  const { config, deps, logger } = ctx;
  if (config.auth === 'off') {
    logger.warn(
      'AUTH=off: the HTTP API lets every caller in without an API key, and any caller reads any result',
    );
    return openAccess(config.kafkaAnonymousCredentials);
  }
  let sql: Awaited<ReturnType<typeof deps.sql>>;
  try {
    sql = await deps.sql();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(
      `API keys (AUTH=on) are kept in PostgreSQL, which does not answer at DATABASE_URL: ${reason}`,
      {
        cause: err,
      },
    );
  }
  const store = new KeyStore(sql);
  let limiter: RateLimiter | undefined;
  return new KeyAccess({
    find: (id) => store.find(id),
    cacheTtlMs: config.authCacheTtl,
    horizonMs: config.redisHorizon,
    // Its own prefix: a caller's meta.limiter.key can never name (and spend) a key's quota.
    limiter: () => {
      limiter ??= new RateLimiter({ redis: deps.redis(), prefix: apiKeyLimiterPrefix(config.redisPrefix) });
      return limiter;
    },
  });
}

/** The Redis prefix of the API keys' rate limiter (`requester limiter show --api-key` reads it). */
export function apiKeyLimiterPrefix(redisPrefix: string): string {
  return `${redisPrefix}:auth:`;
}
