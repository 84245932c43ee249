import {
  DESTINATION_NAME_PATTERN,
  defaultDeadlineProblem,
  MAX_CLIENT_LENGTH,
} from '@requester/shared/contract';
import { ValidationError } from '@requester/shared/errors';
import { durationToMs } from '@requester/shared/time';
import { type KeyRate, MAX_KEY_IN_FLIGHT, MAX_KEY_WEIGHT } from './types.ts';

/**
 * The checks of what an operator gives a key (name, hosts, rate, destinations, weight, cap): each
 * throws a ValidationError naming the field, before anything is stored.
 */

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

const RATE_UNITS: Record<string, string> = { ms: 'ms', s: 's', sec: 's', m: 'm', min: 'm', h: 'h' };

/** `200/s`, `50/100ms`, `1000/10m`, `5000/h`; throws a ValidationError naming `rate` otherwise. */
export function parseRate(text: string): KeyRate {
  const match = /^(\d+)\/(\d*)([a-z]+)$/.exec(text.trim());
  const unit = match ? RATE_UNITS[match[3] ?? ''] : undefined;
  const value = Number(match?.[1]);
  if (!match || !unit || !Number.isSafeInteger(value) || value < 1) {
    throw new ValidationError([
      { path: 'rate', message: `${JSON.stringify(text)} is not <count>/<unit>, e.g. 200/s or 1000/10m` },
    ]);
  }
  const duration = `${match[2] || '1'}${unit}`;
  if (durationToMs(duration) < 1)
    throw new ValidationError([{ path: 'rate', message: 'the window must be at least 1ms' }]);
  return { value, duration };
}

/**
 * Host patterns: a host name, or `*.` + a domain (any name under it, not the domain itself), each
 * with an optional `:port` (an IPv6 literal in brackets: `[::1]:8080`); without a port, any port.
 */
export function checkHostPattern(pattern: string): string {
  const text = pattern.trim().toLowerCase();
  const { host, port } = splitHostPattern(text);
  const bare = host.startsWith('*.') ? host.slice(2) : host;
  const validPort =
    port === undefined || (/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535);
  if (
    !validPort ||
    (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(bare) && !isIpLiteral(bare))
  ) {
    throw new ValidationError([
      {
        path: 'hosts',
        message: `${JSON.stringify(pattern)} is not a host name or *.domain, with an optional :port`,
      },
    ]);
  }
  return port === undefined ? host : `${host}:${Number(port)}`;
}

/** A host pattern's host and port (undefined: any port). */
export function splitHostPattern(pattern: string): { host: string; port?: string } {
  const match = /^(\[[^\]]*\]|[^:]*):(\d*)$/.exec(pattern);
  return match ? { host: match[1] as string, port: match[2] as string } : { host: pattern };
}

function isIpLiteral(text: string): boolean {
  return /^[0-9.]+$/.test(text) || /^\[[0-9a-f:.]+\]$/.test(text);
}

export function checkKeyName(name: string): string {
  if (name.length > MAX_CLIENT_LENGTH || !NAME_PATTERN.test(name)) {
    throw new ValidationError([
      {
        path: 'name',
        message: `must be 1-${MAX_CLIENT_LENGTH} letters, digits, '.', '_' or '-', starting with a letter or digit`,
      },
    ]);
  }
  return name;
}

export function checkDestinationNames(input: readonly string[]): string[] {
  const names = [...new Set(input.map((n) => n.trim()).filter(Boolean))];
  for (const name of names)
    if (!DESTINATION_NAME_PATTERN.test(name))
      throw new ValidationError([
        { path: 'destinations', message: `${JSON.stringify(name)} is not a destination name` },
      ]);
  return names;
}

export function checkWeight(weight: number): void {
  if (!Number.isInteger(weight) || weight < 1 || weight > MAX_KEY_WEIGHT) {
    throw new ValidationError([
      { path: 'weight', message: `must be a whole number from 1 to ${MAX_KEY_WEIGHT}` },
    ]);
  }
}

export function checkMaxInFlight(maxInFlight: number): void {
  if (!Number.isInteger(maxInFlight) || maxInFlight < 0 || maxInFlight > MAX_KEY_IN_FLIGHT) {
    throw new ValidationError([
      { path: 'maxInFlight', message: `must be a whole number from 0 (no cap) to ${MAX_KEY_IN_FLIGHT}` },
    ]);
  }
}

export function checkDeadline(deadline: string): void {
  const problem = defaultDeadlineProblem(deadline);
  if (problem) throw new ValidationError([{ path: 'deadline', message: problem }]);
}
