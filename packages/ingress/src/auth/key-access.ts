import type { RateLimiter } from '@requester/policies';
import type { RequestEnvelope } from '@requester/shared/contract';
import {
  hashSecret,
  type KeyRecord,
  type KeyScopes,
  parseRate,
  parseToken,
  secretHashAccepted,
} from '../keys/index.ts';
import { type Access, type Admission, type Caller, decisions, type Refusal, withoutMark } from './access.ts';
import { CLIENT_IS_OURS, forbidden, INVALID, KEYS_UNAVAILABLE, MISSING } from './refusals.ts';
import { foreignHostHeader, outOfScope } from './scopes.ts';

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
    const issues = outOfScope(caller, envelope, written, this.#options.horizonMs, this.#now());
    if (issues.length > 0) {
      decisions.inc({ client: caller.name, outcome: 'forbidden' });
      return { ok: false, refusal: forbidden(issues) };
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

function clientOf(resultJson: string): string | undefined {
  try {
    const client = (JSON.parse(resultJson) as { meta?: { client?: unknown } }).meta?.client;
    return typeof client === 'string' ? client : undefined;
  } catch {
    return undefined;
  }
}
