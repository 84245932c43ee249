/**
 * Address entries (an IP or CIDR range with an optional port) as ALLOW_PRIVATE_TARGETS lists them
 * and the SSRF guard matches targets against them.
 *
 * @module
 */

import { isIP } from 'node:net';

/**
 * One entry of ALLOW_PRIVATE_TARGETS: an IP or CIDR range, optionally with a port (`127.0.0.1:8081`,
 * `10.0.0.0/8:443`, `[::1]:8080`, `[fc00::/7]:443`: IPv6 with a port in brackets). No port = any.
 */
export interface AddressEntry {
  address: string;
  family: 'ipv4' | 'ipv6';
  /** Prefix length; undefined = this address alone. */
  bits: number | undefined;
  /** undefined = every port. */
  port: number | undefined;
}

/** The entry `text` stands for, or undefined when it is not one (`*` is not an entry). */
export function parseAddressEntry(text: string): AddressEntry | undefined {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  const withPort = bracketed ? undefined : /^([\d./]+):(\d+)$/.exec(text); // IPv4 only: IPv6 needs brackets
  const range = bracketed?.[1] ?? withPort?.[1] ?? text;
  const portText = bracketed?.[2] ?? withPort?.[2];
  const [address = '', bits, extra] = range.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined || (bracketed && family !== 6)) return undefined;
  const maxBits = family === 6 ? 128 : 32;
  if (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= maxBits)) return undefined;
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && !(port >= 1 && port <= 65535)) return undefined;
  return {
    address,
    family: family === 6 ? 'ipv6' : 'ipv4',
    bits: bits === undefined ? undefined : Number(bits),
    port,
  };
}
