import { decodeQueuedTask, encodeQueuedTask } from '@requester/shared';

/**
 * What the admin views (admin API, operator UI, admin CLI) show of a request, a result, a dead
 * letter or a queued task: the callers' secrets hidden. An admin read key is an operator's, not
 * a tenant's: it must not harvest the credentials the requests carry (docs/architecture.md §10).
 * Showing everything is an explicit, journaled act (`reveal`), never the default.
 *
 * The rule, one for headers and query parameters alike (`isCredentialName`): a name is a
 * credential's when one of its words (split at `-`, `_`, `.`, spaces and lowerCamel humps) is a
 * word of CREDENTIAL_WORDS, or its letters contain one of CREDENTIAL_PARTS (`accesstoken`,
 * `clientsecret`). Hidden as well, whatever their names:
 * - the userinfo of a URL (`user:pass@`, or a bare token as user);
 * - bodies (request and response) and `proxyData`: free text a rule cannot read — a form with a
 *   `client_secret`, a JSON login, a token response — shown as their size only;
 * - the value of a queued task or dead letter that is not a request (its raw record).
 * Not recognized: a secret in a URL path segment (webhook URLs with a token in the path) or in a
 * header or parameter whose name says nothing of it. Callers should carry credentials in headers
 * or named parameters (or use `meta.signing`, whose secrets never travel at all).
 */
export const REDACTED = '[redacted]';

/** Whole words that make a name a credential's (`x-api-key`, `Proxy-Authorization`, `sig`). */
export const CREDENTIAL_WORDS: ReadonlySet<string> = new Set([
  'apikey',
  'auth',
  'authorization',
  'bearer',
  'cookie',
  'credential',
  'credentials',
  'jwt',
  'key',
  'otp',
  'pass',
  'passphrase',
  'passwd',
  'password',
  'pwd',
  'secret',
  'session',
  'sessionid',
  'sig',
  'signature',
  'token',
]);

/** Parts that make a name a credential's wherever they stand in its letters (`accesstoken`). */
export const CREDENTIAL_PARTS: readonly string[] = [
  'apikey',
  'cookie',
  'credential',
  'passw',
  'secret',
  'sessid',
  'session',
  'signature',
  'token',
];

export function isCredentialName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  if (words.some((word) => CREDENTIAL_WORDS.has(word))) return true;
  const letters = words.join('');
  return CREDENTIAL_PARTS.some((part) => letters.includes(part));
}

/** `[redacted: 42 bytes]`: what a hidden body or value shows (empty ones stay empty). */
function hiddenText(text: string): string {
  return `${REDACTED.slice(0, -1)}: ${Buffer.byteLength(text, 'utf8')} bytes]`;
}

function hiddenJson(value: unknown): string {
  return hiddenText(JSON.stringify(value) ?? '');
}

/** `scheme://` `userinfo@` `host…path` `?query` `#fragment` of an absolute URL, as written. */
const URL_PARTS = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*@)?([^?#]*)(\?[^#]*)?(#.*)?$/is;

/**
 * A URL with its userinfo and the values of its credential parameters (query, and a fragment
 * written as parameters, where OAuth puts tokens) replaced by `[redacted]`; the rest as written.
 * Text that is not an absolute URL is hidden whole (an empty one, a wake-up, stays empty).
 */
export function redactUrl(uri: string): string {
  if (uri === '') return uri;
  const parts = URL_PARTS.exec(uri);
  if (!parts) return hiddenText(uri);
  const [, scheme = '', userinfo, rest = '', query, fragment] = parts;
  return (
    scheme +
    (userinfo ? `${REDACTED}@` : '') +
    rest +
    (query ? `?${redactParameters(query.slice(1))}` : '') +
    (fragment ? `#${redactParameters(fragment.slice(1))}` : '')
  );
}

function redactParameters(text: string): string {
  return text
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      if (equals < 0) return pair;
      return isCredentialName(decodedName(pair.slice(0, equals)))
        ? `${pair.slice(0, equals + 1)}${REDACTED}`
        : pair;
    })
    .join('&');
}

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' '));
  } catch {
    return name;
  }
}

/** Headers with the values of credential headers replaced by `[redacted]`. */
export function redactHeaders<T>(headers: T): T {
  if (!isObject(headers)) return headers;
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name, isCredentialName(name) ? REDACTED : value]),
  ) as T;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A body as shown: its size when it has content. */
function redactBody(body: unknown): unknown {
  if (body === undefined || body === null || body === '') return body;
  return typeof body === 'string' ? hiddenText(body) : hiddenJson(body);
}

function redactMeta(meta: unknown): unknown {
  if (!isObject(meta) || meta.proxyData === undefined) return meta;
  return { ...meta, proxyData: hiddenJson(meta.proxyData) };
}

/**
 * A request envelope (or anything read where one should be: it may be invalid) as shown: its
 * URL, credential headers, body and proxyData redacted; every other field as it is.
 */
export function redactEnvelope<T>(envelope: T): T {
  if (!isObject(envelope)) return envelope;
  const request = envelope.request;
  return {
    ...envelope,
    ...(isObject(request)
      ? {
          request: {
            ...request,
            ...(typeof request.uri === 'string' ? { uri: redactUrl(request.uri) } : {}),
            ...(request.headers === undefined ? {} : { headers: redactHeaders(request.headers) }),
            ...(request.body === undefined ? {} : { body: redactBody(request.body) }),
          },
        }
      : {}),
    ...(envelope.meta === undefined ? {} : { meta: redactMeta(envelope.meta) }),
  } as T;
}

/** A result as shown: the response's credential headers and body, and proxyData, redacted. */
export function redactResult<T>(result: T): T {
  if (!isObject(result)) return result;
  const response = result.response;
  return {
    ...result,
    ...(isObject(response)
      ? {
          response: {
            ...response,
            ...(response.headers === undefined ? {} : { headers: redactHeaders(response.headers) }),
            ...(response.body === undefined ? {} : { body: redactBody(response.body) }),
          },
        }
      : {}),
    ...(result.meta === undefined ? {} : { meta: redactMeta(result.meta) }),
  } as T;
}

/**
 * A dead letter as shown: its envelope and result redacted, and the value of a raw record (one
 * that held no valid request) as its size; its key stays (the requestId or partition it names).
 */
export function redactDeadLetter<T>(record: T): T {
  if (!isObject(record)) return record;
  const raw = record.record;
  return {
    ...record,
    ...(record.envelope === undefined ? {} : { envelope: redactEnvelope(record.envelope) }),
    ...(record.result === undefined ? {} : { result: redactResult(record.result) }),
    ...(isObject(raw) && typeof raw.value === 'string'
      ? { record: { ...raw, value: hiddenText(Buffer.from(raw.value, 'base64').toString('utf8')) } }
      : {}),
  } as T;
}

/**
 * A queued task's payload (`encodeQueuedTask`) as shown: the request riding inline redacted, the
 * rest (ref, tries, waits) as it is, still in the queue's own encoding. A payload that is not a
 * task (a dead task may be anything) is hidden whole.
 */
export function redactQueuedPayload(payload: string): string {
  let task: ReturnType<typeof decodeQueuedTask>;
  try {
    task = decodeQueuedTask(payload);
  } catch {
    return hiddenText(payload);
  }
  if (!task.inline) return payload;
  return encodeQueuedTask({ ...task, inline: { ...task.inline, value: redactEnvelope(task.inline.value) } });
}
