import { readFileSync } from 'node:fs';
import type { DestinationInfo, DestinationStore, Sql } from '@requester/shared';
import { CredentialStore, UsageError, ValidationError } from '@requester/shared';
import { isoTime } from '../format.ts';

/**
 * Destinations as an operator manages them: the operations behind `requester destinations
 * create|update|list|show|delete` (./cli.ts) and `/admin/api/destinations…` (./api.ts), over the
 * destination store of @requester/shared. Each change is a recorded operator action
 * (`destinations.<verb>`) naming the destination and its version; a destination holds no secret.
 */

/**
 * Where a live credential may be sent, for the store to refuse a destination whose credential is
 * not bound to its origin (undefined: none named yet; null: no such credential). No secret is opened.
 */
export function credentialOriginsOf(sql: Sql) {
  return async (name: string) => {
    const live = await new CredentialStore(sql, undefined).liveOrigins();
    return live.has(name) ? live.get(name) : null;
  };
}

/** A version of a destination as every face shows it. */
export interface DestinationView {
  name: string;
  version: number;
  baseUrl: string;
  headers?: Record<string, string>;
  /** The names of its secret headers; their values are never shown. */
  secretHeaderNames?: string[];
  credentials?: string;
  limiter?: unknown;
  retry?: unknown;
  maxConcurrency?: number;
  timeout?: string;
  maxBodyBytes?: number;
  deadline?: string;
  breaker?: { failureThreshold?: number; openDuration?: string; maxOpenDuration?: string };
  pacing?: boolean;
  createdAt: string | null;
  createdBy?: string;
}

export function destinationView(info: DestinationInfo): DestinationView {
  return {
    name: info.name,
    version: info.version,
    ...info.spec,
    createdAt: isoTime(info.createdAt.getTime()),
    ...(info.createdBy ? { createdBy: info.createdBy } : {}),
  };
}

/** A refused input is the operator's: exit 2 in the CLI, 400 in the API, the fields named. */
async function refusing<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof ValidationError) throw new UsageError(err.message);
    throw err;
  }
}

export async function createDestination(
  store: DestinationStore,
  name: string,
  spec: unknown,
  actor: string,
): Promise<DestinationView> {
  return destinationView(await refusing(() => store.create(name, spec, actor)));
}

/** A new version of `name`: the fields given laid over the current version's. */
export async function updateDestination(
  store: DestinationStore,
  name: string,
  changes: Record<string, unknown>,
  actor: string,
): Promise<DestinationView> {
  if (Object.keys(changes).length === 0) throw new UsageError('destinations update: nothing to change');
  const updated = await refusing(() => store.update(name, changes, actor, true));
  if (!updated) throw new UsageError(`no destination named ${name} (requester destinations list)`);
  return destinationView(updated);
}

export async function listDestinations(store: DestinationStore): Promise<DestinationView[]> {
  return (await store.list()).map(destinationView);
}

/** The current version of `name` and every version before it. */
export async function showDestination(
  store: DestinationStore,
  name: string,
): Promise<{ current: DestinationView; versions: DestinationView[] }> {
  const current = await store.get(name);
  if (!current) throw new UsageError(`no destination named ${name} (requester destinations list)`);
  return { current: destinationView(current), versions: (await store.history(name)).map(destinationView) };
}

export async function deleteDestination(store: DestinationStore, name: string): Promise<{ deleted: string }> {
  if (!(await store.delete(name)))
    throw new UsageError(`no destination named ${name} (requester destinations list)`);
  return { deleted: name };
}

/** The options of `destinations create|update` that make a spec (all optional: update merges). */
export interface SpecOptions {
  fromFile?: string;
  baseUrl?: string;
  header?: string[];
  /** A file of secret headers, `Name: value` a line (`-` = stdin): never on the command line. */
  secretHeaderFile?: string;
  credentials?: string;
  algorithm?: string;
  rate?: string[];
  retryMax?: number;
  retryDelay?: string;
  retryMaxDelay?: string;
  maxConcurrency?: number;
  timeout?: string;
  maxBodyBytes?: number;
  /** The default start-by deadline of its requests (a duration). */
  deadline?: string;
  /** Its own breaker's thresholds (given together: an update replaces them as a whole). */
  breakerThreshold?: number;
  breakerOpen?: string;
  breakerMaxOpen?: string;
  pacing?: 'on' | 'off';
}

/**
 * The spec (or, for update, the changes) the options describe: `--from-file` (JSON; `-` = stdin)
 * first, then each option over it. `--rate 5/1s` (repeatable) with `--algorithm` (default
 * token-bucket) is the limiter; `--header 'Name: value'` (repeatable) the static headers.
 */
export function specFromOptions(options: SpecOptions): Record<string, unknown> {
  const spec: Record<string, unknown> = options.fromFile
    ? (parseJson(readFileSync(options.fromFile === '-' ? 0 : options.fromFile, 'utf8')) as Record<
        string,
        unknown
      >)
    : {};
  if (options.baseUrl !== undefined) spec.baseUrl = options.baseUrl;
  if (options.header?.length) spec.headers = Object.fromEntries(options.header.map(headerOf));
  if (options.secretHeaderFile !== undefined)
    spec.secretHeaders = Object.fromEntries(
      readFileSync(options.secretHeaderFile === '-' ? 0 : options.secretHeaderFile, 'utf8')
        .split(/\r?\n/)
        .filter((line) => line.trim() && !line.trimStart().startsWith('#'))
        .map(secretHeaderOf),
    );
  if (options.credentials !== undefined) spec.credentials = options.credentials;
  if (options.rate?.length)
    spec.limiter = {
      algorithm: options.algorithm ?? 'token-bucket',
      rates: options.rate.flatMap((r) => r.split(',')).map(rateOf),
    };
  if (options.retryMax !== undefined)
    spec.retry = {
      max: options.retryMax,
      ...(options.retryDelay ? { delay: options.retryDelay } : {}),
      ...(options.retryMaxDelay ? { maxDelay: options.retryMaxDelay } : {}),
    };
  if (options.maxConcurrency !== undefined) spec.maxConcurrency = options.maxConcurrency;
  if (options.timeout !== undefined) spec.timeout = options.timeout;
  if (options.maxBodyBytes !== undefined) spec.maxBodyBytes = options.maxBodyBytes;
  if (options.deadline !== undefined) spec.deadline = options.deadline;
  const breaker = {
    ...(options.breakerThreshold === undefined ? {} : { failureThreshold: options.breakerThreshold }),
    ...(options.breakerOpen === undefined ? {} : { openDuration: options.breakerOpen }),
    ...(options.breakerMaxOpen === undefined ? {} : { maxOpenDuration: options.breakerMaxOpen }),
  };
  if (Object.keys(breaker).length > 0) spec.breaker = breaker;
  if (options.pacing !== undefined) spec.pacing = options.pacing === 'on';
  return spec;
}

function parseJson(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not an object');
    return value;
  } catch (err) {
    throw new UsageError(
      `--from-file: not a JSON object (${err instanceof Error ? err.message : String(err)})`,
    );
  }
}

function headerOf(text: string): [string, string] {
  const at = text.indexOf(':');
  if (at <= 0) throw new UsageError(`--header ${JSON.stringify(text)}: expected 'Name: value'`);
  return [text.slice(0, at).trim(), text.slice(at + 1).trim()];
}

/** A line of the secret header file; the error never echoes the value. */
function secretHeaderOf(line: string): [string, string] {
  const at = line.indexOf(':');
  if (at <= 0) throw new UsageError("--secret-header-file: each line must be 'Name: value'");
  return [line.slice(0, at).trim(), line.slice(at + 1).trim()];
}

/** `5/1s`, `100/m`: calls per window (a unit alone is one of it). */
function rateOf(text: string): { value: number; duration: string } {
  const match = /^\s*(\d+)\s*\/\s*(\d*)([a-zµ]+)\s*$/.exec(text);
  if (!match)
    throw new UsageError(`--rate ${JSON.stringify(text)}: expected calls/window, e.g. 5/1s or 100/m`);
  return { value: Number(match[1]), duration: `${match[2] || '1'}${match[3]}` };
}

/**
 * The spec (or changes) of the operator UI's form: its blank fields are left out, so an update
 * changes only what was filled in. `headers`: one `Name: value` a line; `rate`: `5/1s`, comma-separated.
 */
export function specFromForm(form: Record<string, unknown>): Record<string, unknown> {
  const text = (field: string) => {
    const value = form[field];
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
  };
  const whole = (field: string) => {
    const value = text(field);
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isSafeInteger(n)) throw new UsageError(`${field} must be a whole number, got ${value}`);
    return n;
  };
  const options: SpecOptions = {};
  const baseUrl = text('baseUrl');
  if (baseUrl) options.baseUrl = baseUrl;
  const headers = text('headers');
  if (headers) options.header = headers.split(/\r?\n/).filter((line) => line.trim());
  const credentials = text('credentials');
  if (credentials) options.credentials = credentials;
  const rate = text('rate');
  if (rate) options.rate = [rate];
  const algorithm = text('algorithm');
  if (algorithm) options.algorithm = algorithm;
  const retryMax = whole('retryMax');
  if (retryMax !== undefined) options.retryMax = retryMax;
  const maxConcurrency = whole('maxConcurrency');
  if (maxConcurrency !== undefined) options.maxConcurrency = maxConcurrency;
  const timeout = text('timeout');
  if (timeout) options.timeout = timeout;
  const maxBodyBytes = whole('maxBodyBytes');
  if (maxBodyBytes !== undefined) options.maxBodyBytes = maxBodyBytes;
  const deadline = text('deadline');
  if (deadline) options.deadline = deadline;
  const breakerThreshold = whole('breakerThreshold');
  if (breakerThreshold !== undefined) options.breakerThreshold = breakerThreshold;
  const breakerOpen = text('breakerOpen');
  if (breakerOpen) options.breakerOpen = breakerOpen;
  const pacing = text('pacing');
  if (pacing === 'on' || pacing === 'off') options.pacing = pacing;
  return specFromOptions(options);
}

/** A destination's limiter as one line: `token-bucket 50/1s, 1000/1m + 1000000/month from day 15 (UTC)`. */
export function limiterText(limiter: unknown, none: string): string {
  const spec = limiter as
    | {
        algorithm: string;
        rates?: Array<{ value: number; duration: string }>;
        quota?: { value: number; period: string; resetDay?: number; timeZone?: string };
      }
    | undefined;
  if (!spec) return none;
  const rates = (spec.rates ?? []).map((r) => `${r.value}/${r.duration}`).join(', ');
  const q = spec.quota;
  const from =
    q && q.period !== 'day' ? ` from ${q.period === 'week' ? 'weekday' : 'day'} ${q.resetDay ?? 1}` : '';
  const quota = q ? `${q.value}/${q.period}${from} (${q.timeZone ?? 'UTC'})` : '';
  return rates ? `${spec.algorithm} ${rates}${quota ? ` + ${quota}` : ''}` : `quota ${quota}`;
}

/** Its own breaker's settings, `origin's` without one (its calls go through the origin's breaker). */
export function breakerText(breaker: DestinationView['breaker']): string {
  if (!breaker) return "origin's";
  const parts = [
    breaker.failureThreshold === undefined ? undefined : `${breaker.failureThreshold} failures`,
    breaker.openDuration === undefined ? undefined : `open ${breaker.openDuration}`,
    breaker.maxOpenDuration === undefined ? undefined : `max ${breaker.maxOpenDuration}`,
  ].filter((p) => p !== undefined);
  return `own${parts.length > 0 ? `: ${parts.join(', ')}` : ''}`;
}
