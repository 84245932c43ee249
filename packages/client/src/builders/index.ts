import type { HttpRequest, RequestEnvelope, RequestInput, RequestMetaInput } from '../contract/index.ts';
import { newRequestId } from '../ids.ts';

/**
 * Builders of request envelopes for the common cases. Each option is a plain piece of the
 * contract's `meta` (typed from the generated `RequestMeta`), merged left to right, so a field the
 * contract gains is usable at once as `{ field: … }` before it has a helper of its own:
 *
 *   envelope(post('https://partner.example/orders', order), ordered('order-42'), signedWith('hooks'))
 */
export type MetaOption = RequestMetaInput;

/** The request with a requestId (generated when none is given) and the options merged into `meta`. */
export function envelope(request: HttpRequest | string, ...options: MetaOption[]): RequestEnvelope {
  const meta: RequestMetaInput = Object.assign({}, ...options);
  return {
    request: typeof request === 'string' ? { uri: request } : request,
    meta: { ...meta, requestId: meta.requestId ?? newRequestId() },
  };
}

/** A request as the client sends it: `meta.requestId` filled in when missing, nothing else changed. */
export function withRequestId(input: RequestInput | RequestEnvelope): RequestEnvelope {
  const meta = input.meta ?? {};
  if (meta.requestId !== undefined) return input as RequestEnvelope;
  return { ...input, meta: { ...meta, requestId: newRequestId() } };
}

/** A GET of `uri`. */
export function get(uri: string, headers?: Record<string, string>): HttpRequest {
  return { uri, method: 'GET', ...(headers ? { headers } : {}) };
}

/**
 * A POST of `body`: a string as it is, anything else as JSON (with `content-type:
 * application/json` unless `headers` names one).
 */
export function post(uri: string, body: unknown, headers: Record<string, string> = {}): HttpRequest {
  if (typeof body === 'string') return { uri, method: 'POST', body, headers };
  const typed = Object.keys(headers).some((name) => name.toLowerCase() === 'content-type');
  return {
    uri,
    method: 'POST',
    body: JSON.stringify(body),
    headers: typed ? headers : { 'content-type': 'application/json', ...headers },
  };
}

/** Its own requestId (else one is generated): reuse it to retry the same request. */
export function requestId(id: string): MetaOption {
  return { requestId: id };
}

/** A sync call: over HTTP the reply is the result (or `202` + Location, which `call()` follows). */
export function sync(): MetaOption {
  return { sync: true };
}

/** Not before `at` (a Date or an RFC 3339 string); a past instant runs now. */
export function scheduledAt(at: Date | string): MetaOption {
  return { scheduled: typeof at === 'string' ? at : at.toISOString() };
}

/**
 * In the ordered partition `key`: requests of one client sharing it run one at a time, in order.
 * The `!` that makes a partition ordered is added when missing.
 */
export function ordered(key: string): MetaOption {
  return { partition: key.startsWith('!') ? key : `!${key}` };
}

/** In the (unordered) partition `key`: its requests share a queue and a fair share of workers. */
export function partition(key: string): MetaOption {
  return { partition: key };
}

/** Signed with the signing credential `keyId` kept by Requester (Standard Webhooks or X-Signature). */
export function signedWith(keyId: string): MetaOption {
  return { signing: { keyId } };
}

/** Made with the target credential `name` kept by Requester (OAuth2, mTLS, egress proxy). */
export function withCredentials(name: string): MetaOption {
  return { credentials: name };
}

/**
 * To the destination `name` an operator defined (`requester destinations create`): the request's
 * URI is then a path relative to it (`get('/v2/invoices?x=1')`), and the destination's headers,
 * credential, rate limit and retries apply; `meta.destination` of the result names its version.
 */
export function destination(name: string): MetaOption {
  return { destination: name };
}

/** Echoed untouched in the result. */
export function proxyData(data: unknown): MetaOption {
  return { proxyData: data };
}

/**
 * A wake-up: no HTTP call; at `at` the result comes back as a 200 carrying `body`, `headers` and
 * `proxyData` (an alarm clock for a service).
 */
export function wakeUp(
  at: Date | string,
  payload: { body?: string; headers?: Record<string, string>; proxyData?: unknown } = {},
  ...options: MetaOption[]
): RequestEnvelope {
  const { proxyData: data, ...rest } = payload;
  return envelope(
    { uri: '', ...rest },
    scheduledAt(at),
    ...(data === undefined ? [] : [proxyData(data)]),
    ...options,
  );
}
