import { smallestLimiterValue } from '../contract/quota.ts';
import type { LimiterSpec, RequestEnvelope, RetrySpec } from '../contract/request.ts';
import { credentialOriginOf, hostHeaderOf } from '../credentials/origins.ts';
import { toMs, tryParseDuration } from '../time/duration.ts';
import { type DestinationSpec, destinationOrigin } from './spec.ts';

/** One version of a destination, as requests resolve it. */
export interface Destination {
  name: string;
  version: number;
  spec: DestinationSpec;
  /** Its secret headers, opened: only where a call is made (the executor), never written anywhere. */
  secretHeaders?: Record<string, string>;
}

/** Which destination and version a call followed: the result's `meta.destination`. */
export interface AppliedDestination {
  name: string;
  version: number;
  /** The rate limits the call was made under, in the order taken; absent when none. */
  limiters?: AppliedLimiter[];
  /** Attempts in total its retry policy allowed; absent: no retry policy (one attempt). */
  retryMax?: number;
  /** Its attempt timeout; absent: the service's TARGET_RESPONSE_TIMEOUT. */
  timeout?: string;
  /** Where the caller's own ask, lower than the destination's, applied; absent when none did. */
  lowered?: LoweredPolicy[];
}

/** A rate limit of a call to a destination: the caller's own (`meta.limiter`) or the destination's. */
export type AppliedLimiter = 'caller' | 'destination';

/** A part of a destination's policy a caller may lower: its retries, its attempt timeout. */
export type LoweredPolicy = 'retry' | 'timeout';

export type Resolution =
  | { ok: true; envelope: RequestEnvelope; applied: AppliedDestination }
  | { ok: false; path: string; message: string };

/**
 * The concurrency key of a destination's calls in flight: as its limiter key, one no caller can
 * write, shared by every caller (the executor does not scope it to the client).
 */
export function destinationConcurrencyKey(name: string): string {
  return destinationLimiterKey(name);
}

export function isDestinationConcurrencyKey(key: string): boolean {
  return isDestinationLimiterKey(key);
}

/**
 * The breaker of a destination with breaker settings: as its limiter key, one no origin can be
 * (it is no URL), so its state is apart from its origin's and from any other destination's.
 */
export function destinationBreakerKey(name: string): string {
  return destinationLimiterKey(name);
}

export function isDestinationBreakerKey(key: string): boolean {
  return isDestinationLimiterKey(key);
}

/** The thresholds of a destination's own breaker (ms); a field absent takes the deployment's. */
export interface DestinationBreaker {
  key: string;
  failureThreshold?: number;
  openMs?: number;
  maxOpenMs?: number;
}

/**
 * What a destination pins of its calls beyond the request itself, for the executor's gates: its
 * own breaker (absent: the origin's), whether the origin's pacing applies to them, and its rate
 * limit, one quota for every caller, taken after the caller's own `meta.limiter` if any.
 */
export interface DestinationGates {
  name: string;
  breaker?: DestinationBreaker;
  pacing: boolean;
  limiter?: LimiterSpec;
}

export function destinationGatesOf(destination: Pick<Destination, 'name' | 'spec'>): DestinationGates {
  const { name, spec } = destination;
  const gates: DestinationGates = { name, pacing: spec.pacing !== false };
  if (spec.limiter) gates.limiter = { key: destinationLimiterKey(name), ...spec.limiter };
  if (spec.breaker) {
    const { failureThreshold, openDuration, maxOpenDuration } = spec.breaker;
    const openMs = durationMs(openDuration);
    const maxOpenMs = durationMs(maxOpenDuration);
    gates.breaker = {
      key: destinationBreakerKey(name),
      ...(failureThreshold === undefined ? {} : { failureThreshold }),
      ...(openMs === undefined ? {} : { openMs }),
      ...(maxOpenMs === undefined ? {} : { maxOpenMs }),
    };
  }
  return gates;
}

function durationMs(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const parsed = tryParseDuration(text);
  return parsed.ok ? Math.max(1, toMs(parsed.ns)) : undefined;
}

/**
 * The limiter key of a destination's quota. The space makes it one no caller can write (a
 * `meta.limiter.key` is printable ASCII without spaces), so the executor may take it as one quota
 * for every caller (limiterKeyOf would scope it to the client) without a caller reaching it.
 */
export function destinationLimiterKey(name: string): string {
  return `destination ${name}`;
}

export function isDestinationLimiterKey(key: string): boolean {
  return key.startsWith('destination ');
}

/**
 * A request naming a destination, turned into the call it makes (pure): the destination's base
 * URL before the relative URI, its headers over the caller's, its credential, its limiter beside
 * the caller's (the executor takes it from DestinationGates; a call is made only when both grant,
 * the caller's units counting against both), a retry policy no more generous than its own (a
 * caller may ask for fewer attempts and longer pauses, never more attempts nor shorter pauses),
 * its concurrency key instead of the caller's (one key per call: the destination's cap must count
 * every call to it), and an attempt timeout no longer than its own. The URL built is checked to
 * stay under the base URL, whatever the relative URI held. A request without `meta.destination`
 * is returned as it is.
 */
export function applyDestination(envelope: RequestEnvelope, destination: Destination): Resolution {
  const { spec, name, version } = destination;
  const { request, meta } = envelope;
  const refuse = (path: string, message: string): Resolution => ({ ok: false, path, message });
  const url = URL.parse(spec.baseUrl + request.uri);
  const base = new URL(spec.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  if (
    !url ||
    credentialOriginOf(url) !== destinationOrigin(spec) ||
    (prefix !== '' && url.pathname !== prefix && !url.pathname.startsWith(`${prefix}/`))
  )
    return refuse('request.uri', `must stay under the destination ${name}'s base URL ${spec.baseUrl}`);
  if (hostHeaderOf(request.headers) !== undefined)
    return refuse('request.headers', `a request to the destination ${name} may not name a Host header`);
  const body = request.body;
  if (
    spec.maxBodyBytes !== undefined &&
    body !== undefined &&
    Buffer.byteLength(body, 'utf8') > spec.maxBodyBytes
  )
    return refuse(
      'request.body',
      `is ${Buffer.byteLength(body, 'utf8')} bytes, over the destination ${name}'s limit of ${spec.maxBodyBytes} bytes`,
    );
  const pinned = destination.secretHeaders ? { ...spec.headers, ...destination.secretHeaders } : spec.headers;
  const headers = mergeHeaders(request.headers, pinned);
  const resolvedMeta: RequestEnvelope['meta'] = { ...meta };
  if (spec.credentials !== undefined) resolvedMeta.credentials = spec.credentials;
  const limiters: AppliedLimiter[] = meta.limiter ? ['caller'] : [];
  if (spec.limiter) {
    // The caller's units count against the destination's quota, which must be able to admit them.
    const cost = meta.limiter?.cost;
    const smallest = smallestLimiterValue(spec.limiter);
    if (cost !== undefined && cost > smallest)
      return refuse(
        'meta.limiter.cost',
        `${cost} exceeds the smallest ${spec.limiter.quota ? 'window or quota' : 'window'} of the destination ${name}'s limit (${smallest}): it could never be admitted`,
      );
    limiters.push('destination');
  }
  if (spec.maxConcurrency !== undefined)
    resolvedMeta.concurrency = { key: destinationConcurrencyKey(name), limit: spec.maxConcurrency };
  const timeout = pinnedTimeout(meta.timeout, spec.timeout);
  if (timeout !== undefined) resolvedMeta.timeout = timeout;
  const retry = pinnedRetry(meta.retry, spec.retry);
  if (retry) resolvedMeta.retry = retry;
  else delete resolvedMeta.retry;
  const lowered: LoweredPolicy[] = [];
  if (retry && spec.retry && !sameBackoff(retry, spec.retry)) lowered.push('retry');
  if (timeout !== undefined && spec.timeout !== undefined && timeout !== spec.timeout)
    lowered.push('timeout');
  return {
    ok: true,
    envelope: {
      ...envelope,
      request: { ...request, uri: url.href, ...(headers ? { headers } : {}) },
      meta: resolvedMeta,
    },
    applied: {
      name,
      version,
      ...(limiters.length > 0 ? { limiters } : {}),
      ...(retry ? { retryMax: retry.max } : {}),
      ...(timeout === undefined ? {} : { timeout }),
      ...(lowered.length > 0 ? { lowered } : {}),
    },
  };
}

/** Whether two retry policies make the same attempts at the same pauses (jitter is the caller's). */
function sameBackoff(a: RetrySpec, b: RetrySpec): boolean {
  return a.max === b.max && a.delay === b.delay && a.maxDelay === b.maxDelay && a.multiplier === b.multiplier;
}

/** The caller's headers, less those the destination sets (names compared without case), then the destination's. */
function mergeHeaders(
  caller: Readonly<Record<string, string>> | undefined,
  pinned: Readonly<Record<string, string>> | undefined,
): Record<string, string> | undefined {
  if (!pinned) return caller && { ...caller };
  const names = new Set(Object.keys(pinned).map((n) => n.toLowerCase()));
  const merged: Record<string, string> = {};
  for (const [n, v] of Object.entries(caller ?? {})) if (!names.has(n.toLowerCase())) merged[n] = v;
  return { ...merged, ...pinned };
}

/**
 * The retry policy of a call to a destination: the destination's, or the caller's where it asks for
 * less (fewer attempts; each pause and growth at least the destination's). Without a destination
 * retry policy a call is tried once, as a request without `meta.retry` is.
 */
export function pinnedRetry(
  caller: RetrySpec | undefined,
  pinned: RetrySpec | undefined,
): RetrySpec | undefined {
  if (!pinned) return undefined;
  if (!caller) return { ...pinned };
  return {
    max: Math.min(caller.max, pinned.max),
    delay: longer(caller.delay, pinned.delay),
    maxDelay: longer(caller.maxDelay, pinned.maxDelay),
    multiplier: Math.max(caller.multiplier, pinned.multiplier),
    jitter: caller.jitter,
  };
}

/** The attempt timeout of a call to a destination: the caller's when shorter than the destination's. */
export function pinnedTimeout(caller: string | undefined, pinned: string | undefined): string | undefined {
  if (pinned === undefined || caller === undefined) return caller ?? pinned;
  return longer(caller, pinned) === caller ? pinned : caller;
}

function longer(a: string, b: string): string {
  const pa = tryParseDuration(a);
  const pb = tryParseDuration(b);
  if (!pa.ok || !pb.ok) return b;
  return pa.ns >= pb.ns ? a : b;
}
