import { once } from 'node:events';
import http, { type ClientRequest, type IncomingHttpHeaders, type RequestOptions } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { RequesterError } from '@requester/shared/errors';
import got, { type Got } from 'got';
import { createEgress, type Egress, type EgressIdentity, parseNoProxy } from '../egress/index.ts';
import { type ReservedPort, TARGET_REFUSED, TargetGuard } from './guard.ts';

export { type ReservedPort, reservedPortsOf, TargetGuard } from './guard.ts';

/**
 * Calls to targets (got). Every call ends in a CallOutcome, never a throw: a response (any status)
 * or a failure that says what went wrong in the `meta.error` vocabulary. Retries are not got's
 * business (`retry.limit: 0`): they are a policy decision made after the call (see worker/decide.ts).
 */

export interface HttpCall {
  method: string;
  uri: string;
  headers: Record<string, string>;
  body?: string;
  /** `meta.credentials`: the name of the target credential the call is made with (credentials/). */
  credentials?: string;
  /**
   * The call carries something bound to its origin (a credential, a signature): a redirect is its
   * result, never followed, whatever TARGET_FOLLOW_REDIRECTS says, so that neither the token, the
   * client certificate nor the signed payload reaches another origin.
   */
  keepOrigin?: boolean;
  /**
   * `meta.timeout` (a destination's timeout, or a caller's shorter one): the whole call's bound,
   * connection included. Only ever lowers the client's own bounds (TARGET_RESPONSE_TIMEOUT).
   */
  timeoutMs?: number;
}

export type FailureCode =
  | 'timeout'
  | 'transport_error'
  | 'target_refused'
  | 'payload_too_large'
  | 'credential_unknown'
  | 'credential_revoked'
  | 'credential_unavailable'
  | 'credential_origin_refused';

export type CallOutcome =
  | { kind: 'response'; status: number; headers: Record<string, string>; body: string; durationNs: number }
  | { kind: 'failure'; error: RequesterError & { code: FailureCode }; durationNs: number };

export interface HttpClientSettings {
  connectTimeoutMs: number;
  /** Bound on waiting for response headers, and again on reading the body. */
  responseTimeoutMs: number;
  maxResponseBytes: number;
  followRedirects: boolean;
  /** ALLOW_PRIVATE_TARGETS: IPs / CIDR ranges, each with an optional port, or `*`. */
  allowPrivateTargets: readonly string[];
  /** Requester's own ports and its dependencies': refused whatever allowPrivateTargets says (reservedPortsOf). */
  reservedPorts?: readonly ReservedPort[];
  userAgent?: string;
  /** EGRESS_PROXY: every call through this HTTP proxy (see egress/). */
  egressProxy?: string | undefined;
  /** EGRESS_NO_PROXY: targets called directly despite the proxy. */
  egressNoProxy?: string | undefined;
  /** EGRESS_PROXY_CA_FILE's content: CA certificates (PEM) trusted for https proxies. */
  egressProxyCa?: string | undefined;
}

/** What the caller of a call learns while it runs. */
export interface CallHooks {
  /**
   * The request was handed to the socket whole (the ClientRequest's `finish`): called once, at
   * the first hop, an upper bound of the instant the target could see it. The two-phase limiter
   * counts the call from there (attempt/call.ts). Not called when the request was never
   * written (refused, no connection).
   */
  sent?: () => void;
}

export interface HttpClient {
  /** The call, through `egress` (a credential's connection pools) or the client's own. */
  call(request: HttpCall, egress?: Egress, hooks?: CallHooks): Promise<CallOutcome>;
  /**
   * Connection pools of their own, with a client certificate and/or a proxy (a credential's);
   * the SSRF guard and EGRESS_PROXY apply as to the client's own. The caller destroys them.
   */
  egress(identity: EgressIdentity): Egress;
  /** Closes the kept-alive connections. */
  close(): void;
}

export function createHttpClient(settings: HttpClientSettings): HttpClient {
  const guard = new TargetGuard(settings.allowPrivateTargets, settings.reservedPorts);
  const egressSettings = {
    guard,
    connectTimeoutMs: settings.connectTimeoutMs,
    proxy: settings.egressProxy,
    proxyCa: settings.egressProxyCa,
    noProxy: parseNoProxy(settings.egressNoProxy ?? ''),
  };
  const own = createEgress(egressSettings);
  const connect = settings.connectTimeoutMs;
  const client = got.extend({
    retry: { limit: 0 },
    throwHttpErrors: false,
    followRedirect: settings.followRedirects,
    maxRedirects: 5,
    allowGetBody: true,
    decompress: true,
    timeout: {
      lookup: connect,
      connect,
      secureConnect: connect,
      response: settings.responseTimeoutMs,
      read: settings.responseTimeoutMs,
    },
    headers: { 'user-agent': settings.userAgent ?? 'requester' },
    request: nodeRequest,
    // A redirect to an IP literal skips the lookup, so each hop's URL is checked here too.
    hooks: { beforeRedirect: [(options) => guard.checkUrl(options.url ?? '')] },
  });
  return {
    call: (request, egress = own, hooks = {}) => call(client, guard, settings, request, egress, hooks),
    egress: (identity) => createEgress(egressSettings, identity),
    close: () => own.destroy(),
  };
}

/**
 * Node's request, given only the options got set. got passes every option it knows, most of them
 * undefined, and Node copies that object twice per call (the ClientRequest, then the agent's
 * addRequest), which made those copies the largest allocations of a call; to Node an undefined
 * option and an absent one are the same.
 */
function nodeRequest(url: URL, options: RequestOptions): ClientRequest {
  const set: Record<string, unknown> = {};
  for (const key in options) {
    const value = options[key as keyof RequestOptions];
    if (value !== undefined) set[key] = value;
  }
  return (url.protocol === 'https:' ? https : http).request(url, set);
}

async function call(
  client: Got,
  guard: TargetGuard,
  settings: HttpClientSettings,
  request: HttpCall,
  egress: Egress,
  hooks: CallHooks,
): Promise<CallOutcome> {
  const started = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - started);
  let sent = hooks.sent;
  const onSent = sent
    ? () => {
        sent?.();
        sent = undefined;
      }
    : undefined;
  try {
    const url = new URL(request.uri);
    guard.checkUrl(url);
    const agent = egress.agentsFor(url);
    for (let replays = 0; ; replays++) {
      try {
        const { status, headers, body } = await attempt(client, settings, request, agent, onSent);
        return { kind: 'response', status, headers, body, durationNs: elapsed() };
      } catch (err) {
        if (!(err instanceof StaleConnection)) throw err;
        if (replays >= STALE_REPLAYS || !replayable(request)) throw err.cause;
      }
    }
  } catch (err) {
    return { kind: 'failure', error: failureOf(err, settings, request), durationNs: elapsed() };
  }
}

/**
 * A kept-alive connection the target closed just as a call was written to it (its idle timeout
 * raced ours, or it restarted): the call failed before any answer, and the target most likely
 * never read it. Each replay takes another connection (the failed one is destroyed), so a pool of
 * stale connections is drained in a few; two replays bound it.
 */
const STALE_REPLAYS = 2;

class StaleConnection extends Error {}

/**
 * Replayed as browsers and Go's client do: when the method is idempotent, or the call carries an
 * Idempotency-Key (every call from a request envelope does, see request.ts), so a target that
 * did read the first copy can tell the second from a new call.
 */
function replayable(request: HttpCall): boolean {
  if (IDEMPOTENT.has(request.method.toUpperCase())) return true;
  return Object.keys(request.headers).some((name) => name.toLowerCase() === 'idempotency-key');
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** One try of the call; a reset of a reused connection before any answer throws StaleConnection. */
async function attempt(
  client: Got,
  settings: HttpClientSettings,
  request: HttpCall,
  agent: ReturnType<Egress['agentsFor']>,
  sent: (() => void) | undefined,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const hasBody = request.body !== undefined && request.body !== '';
  const stream = client.stream(request.uri, {
    method: request.method as 'GET',
    headers: request.headers,
    agent,
    ...(hasBody ? { body: request.body } : {}),
    ...(request.keepOrigin ? { followRedirect: false } : {}),
    ...(shorterTimeout(settings, request) === undefined
      ? {}
      : { timeout: { request: shorterTimeout(settings, request) } }),
  });
  let clientRequest: ClientRequest | undefined;
  stream.once('request', (req: ClientRequest) => {
    clientRequest = req;
    if (sent) req.once('finish', sent);
  });
  // Without a body got waits for the caller to write one (any method that may carry a body).
  if (!hasBody) stream.end();
  let response: { statusCode: number; headers: IncomingHttpHeaders };
  try {
    [response] = (await once(stream, 'response')) as [typeof response];
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (clientRequest?.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE'))
      throw new StaleConnection('kept-alive connection closed by the target', { cause: err });
    throw err;
  }
  const body = await readCapped(stream, response.headers, settings.maxResponseBytes);
  return { status: response.statusCode, headers: flattenHeaders(response.headers), body };
}

class ResponseTooLarge extends Error {}

/**
 * Reads the (decompressed) body, giving up as soon as it passes the cap: memory stays bounded.
 * By its events, not `for await`: an async iterator per call (its promises, one per chunk, and its
 * closures) cost more than the few chunks of a usual answer. A body of one chunk is not copied.
 */
function readCapped(stream: Readable, headers: IncomingHttpHeaders, maxBytes: number): Promise<string> {
  const declared = Number(headers['content-length']);
  const tooLarge = (size: number) =>
    new ResponseTooLarge(`response body of ${size}+ bytes exceeds ${maxBytes}`);
  if (Number.isFinite(declared) && declared > maxBytes && !headers['content-encoding']) {
    stream.destroy();
    return Promise.reject(tooLarge(declared));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const fail = (err: unknown) => {
      if (done) return;
      done = true;
      reject(err);
    };
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > maxBytes) {
        fail(tooLarge(size));
        stream.destroy();
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () => {
      if (done) return;
      done = true;
      resolve(
        chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8'),
      );
    });
    stream.once('error', fail);
    // Closed before its end: its error, else what `for await` (stream.finished) threw.
    stream.once('close', () => fail(stream.errored ?? prematureClose()));
    if (stream.errored) fail(stream.errored);
    else if (stream.destroyed) fail(prematureClose());
  });
}

/** The error of a stream closed before its end, as Node's stream.finished makes it. */
function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/** Repeated headers arrive as arrays (set-cookie); the contract carries one string per name. */
function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

/** Maps what got or the socket threw onto the stable `meta.error` codes. */
function failureOf(
  err: unknown,
  settings: HttpClientSettings,
  request: HttpCall,
): RequesterError & { code: FailureCode } {
  const e = err as { code?: string; name?: string; message?: string; event?: string; cause?: unknown };
  const fail = (code: FailureCode, message: string) =>
    new RequesterError(code, message, { cause: err }) as RequesterError & { code: FailureCode };
  if (err instanceof ResponseTooLarge) return fail('payload_too_large', err.message);
  if (e.code === TARGET_REFUSED)
    return fail('target_refused', (e.cause as Error | undefined)?.message ?? String(e.message));
  if (e.name === 'TimeoutError' || e.code === 'ETIMEDOUT') {
    const bound = shorterTimeout(settings, request);
    if (e.event === 'request' && bound !== undefined)
      return fail('timeout', `target did not answer within the call's timeout of ${bound} ms`);
    const phase = timeoutPhase(e.event);
    const limit = phase === 'connect' ? settings.connectTimeoutMs : settings.responseTimeoutMs;
    return fail('timeout', `target did not ${phaseText[phase]} within ${limit} ms`);
  }
  return fail('transport_error', `${e.code ?? e.name ?? 'error'}: ${e.message ?? String(err)}`);
}

/** A call's own timeout, when it is below the client's response timeout (else the client's bounds hold). */
function shorterTimeout(settings: HttpClientSettings, request: HttpCall): number | undefined {
  const ms = request.timeoutMs;
  return ms !== undefined && ms < settings.responseTimeoutMs ? Math.max(1, Math.floor(ms)) : undefined;
}

type Phase = 'connect' | 'response' | 'read';
const phaseText: Record<Phase, string> = {
  connect: 'accept a connection',
  response: 'answer',
  read: 'finish sending its response',
};

function timeoutPhase(event: string | undefined): Phase {
  if (event === 'read') return 'read';
  if (event === 'response' || event === 'send' || event === 'request' || event === 'socket')
    return 'response';
  return 'connect';
}
