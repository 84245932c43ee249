/**
 * What an API key's scopes allow in a request: target hosts (with ports), destinations, sync calls,
 * credentials, and how far ahead it may park a task.
 *
 * @module
 */

import { longestQuotaPeriodMs, longestWaitMs } from '@requester/policies';
import type { RequestEnvelope } from '@requester/shared/contract';
import { hostHeaderMatches, hostHeaderOf } from '@requester/shared/credentials';
import { durationToMs, formatDuration, tryParseRfc3339 } from '@requester/shared/time';
import { splitHostPattern } from '../keys/index.ts';
import type { Caller, Issue, Refusal } from './access.ts';

/**
 * What the key's scopes do not allow in a request, naming each field (none = admitted): its
 * destinations, hosts, sync calls, credentials, and (without `schedule`) anything beyond the Redis
 * horizon.
 */
export function outOfScope(
  caller: Caller,
  envelope: RequestEnvelope,
  written: unknown,
  horizonMs: number,
  now: number,
): Issue[] {
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
  if (!scopes.schedule) issues.push(...beyondHorizon(envelope, written, horizonMs, now));
  return issues;
}

/**
 * What would park the task beyond REDIS_HORIZON, which a key without the `schedule` scope may
 * not do: a `scheduled` instant, a retry pause the caller wrote (`delay`, `maxDelay`), a limiter
 * window whose wait can be longer, a calendar quota (its wait lasts until its reset), a debounce
 * delay (a burst's requests wait that long after their arrival). What only the run tells (a default `maxDelay` reached, a
 * target's Retry-After) is capped by the executor instead (the envelope's `withinHorizon`).
 */
function beyondHorizon(envelope: RequestEnvelope, written: unknown, horizonMs: number, now: number): Issue[] {
  const horizon = `the Redis horizon (REDIS_HORIZON, ${formatDuration(horizonMs)}): this API key lacks the schedule scope`;
  const issues: Issue[] = [];
  const scheduled = envelope.meta.scheduled ? tryParseRfc3339(envelope.meta.scheduled) : undefined;
  if (scheduled?.ok && scheduled.epochMs - now > horizonMs)
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
  const debounce = envelope.meta.debounce;
  if (debounce && durationToMs(debounce.delay) > horizonMs)
    issues.push({ path: 'meta.debounce.delay', message: `${debounce.delay} is beyond ${horizon}` });
  const longestQuotaMs = limiter?.quota && longestQuotaPeriodMs(limiter.quota.period);
  if (longestQuotaMs && longestQuotaMs > horizonMs)
    issues.push({
      path: 'meta.limiter.quota',
      message: `a ${limiter.quota?.period}ly quota can hold a call until its reset, up to ${formatDuration(longestQuotaMs)}, beyond ${horizon}`,
    });
  return issues;
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
export function foreignHostHeader(envelope: RequestEnvelope): Refusal | undefined {
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

/** The retry pauses as the caller wrote them (the validated envelope has the defaults filled in). */
function writtenRetry(written: unknown): { delay?: string; maxDelay?: string } {
  const retry = (written as { meta?: { retry?: Record<string, unknown> } } | undefined)?.meta?.retry;
  if (typeof retry !== 'object' || retry === null) return {};
  return {
    ...(typeof retry.delay === 'string' ? { delay: retry.delay } : {}),
    ...(typeof retry.maxDelay === 'string' ? { maxDelay: retry.maxDelay } : {}),
  };
}
