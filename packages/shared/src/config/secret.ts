/**
 * Secrets in the configuration: a value that never prints, and the redaction of a value as it may
 * be shown.
 *
 * @module
 */

/**
 * A configured secret. It prints, logs and serializes as `[redacted]` (pino, JSON.stringify,
 * util.inspect, `requester config --effective`); only `reveal()` gives the text. Its schema never
 * fails: loadConfig's error message quotes the raw value, so a secret is validated by its user
 * (e.g. the executor parses SIGNING_KEYS at start) with errors that never echo it.
 */
export class SecretText {
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  reveal(): string {
    return this.#text;
  }

  toJSON(): string {
    return '[redacted]';
  }

  toString(): string {
    return '[redacted]';
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return '[redacted]';
  }
}
const REDACTED = '[redacted]';
/**
 * Each URL of a text after its `//`, up to a list separator. Not cut at the path: a password
 * written with an unencoded `/` must not leak (an `@` later in a path over-masks, which is harmless).
 */
const URL_AUTHORITY = /\/\/([^,\s]*)/g;

/**
 * A configuration value as it may be shown (`requester config --effective`, error messages): a
 * SecretText as `[redacted]`, and in text the password of every URL (`scheme://user:password@host`,
 * also with an empty user as in `redis://:password@host`, and each seed of a comma-separated list)
 * replaced by `[redacted]`. Other values pass unchanged.
 */
export function redactConfigValue(value: unknown): unknown {
  if (value instanceof SecretText) return REDACTED;
  if (typeof value !== 'string') return value;
  return value.replace(URL_AUTHORITY, (whole, authority: string) => {
    const at = authority.lastIndexOf('@');
    const colon = authority.indexOf(':');
    if (at < 0 || colon < 0 || colon > at) return whole;
    return `//${authority.slice(0, colon + 1)}${REDACTED}${authority.slice(at)}`;
  });
}
