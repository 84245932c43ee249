/**
 * The zod building blocks of the configuration variables: each parses the text of an environment
 * variable into the value the code uses.
 *
 * @module
 */

import { z } from 'zod';
import { parseAddressEntry } from '../net/address.ts';
import { durationToMs } from '../time/duration.ts';
import { SecretText } from './secret.ts';

export const goDuration = z.string().transform((text, ctx) => {
  try {
    return durationToMs(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return z.NEVER;
  }
});
export const port = z.coerce.number().int().min(0).max(65535);
export const positiveInt = z.coerce.number().int().positive();
export const nonNegativeInt = z.coerce.number().int().min(0);
/** Comma-separated address entries (see parseAddressEntry), or `*`; empty = none. */
export const addressList = z.string().transform((text, ctx) => {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  for (const item of items) {
    if (item !== '*' && !parseAddressEntry(item)) {
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(item)} is not an IP or CIDR range (with an optional :port; IPv6 as [addr]:port), or *`,
      });
    }
  }
  return items;
});
/** Comma-separated `host:port` (IPv6 as `[addr]:port`); at least one. */
export const hostPortList = z
  .string()
  .transform((text) =>
    text
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean),
  )
  .refine(
    (items) => items.length > 0 && items.every((item) => /^(\[[^\]]+\]|[^:[\]\s]+):\d{1,5}$/.test(item)),
    {
      message: 'must be host:port entries, comma-separated (IPv6 as [addr]:port)',
    },
  );

/**
 * Comma-separated limiter keys (`meta.limiter.key`: printable ASCII without spaces, at most 256
 * characters each); empty = none.
 */
export const limiterKeyList = z.string().transform((text, ctx) => {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  for (const item of items) {
    if (!/^[\x21-\x7e]{1,256}$/.test(item))
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(item)} is not a limiter key (printable ASCII without spaces, at most 256 characters)`,
      });
  }
  return new Set(items) as ReadonlySet<string>;
});
/** Comma-separated credential names (1-64 letters, digits, '.', '_', '-'); empty = none. */
export const credentialNameList = z.string().transform((text, ctx) => {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  for (const item of items) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(item))
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(item)} is not a credential name` });
  }
  return new Set(items) as ReadonlySet<string>;
});
export const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => ['true', '1', 'yes'].includes(v));

export const secretText = z.string().transform((text) => new SecretText(text));
