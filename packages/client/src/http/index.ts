import { withRequestId } from '../builders/index.ts';
import type {
  CancelReceipt,
  JournalEvent,
  JournalPage,
  RequestEnvelope,
  RequestInput,
  ResultEnvelope,
} from '../contract/index.ts';
import {
  ConnectionError,
  DeadlineExceededError,
  type Problem,
  problemError,
  type RequesterApiError,
  UnexpectedResponseError,
} from '../errors/index.ts';
import { linked, pause } from './signals.ts';

export interface RetryOptions {
  /** Attempts of one exchange in all, the first included (1 = no retry). Default 5. */
  attempts?: number;
  /** First pause when the gateway sent no `Retry-After`, doubled each time (±20 %). Default 250 ms. */
  minDelayMs?: number;
  /** Longest pause, `Retry-After` included. Default 10 s. */
  maxDelayMs?: number;
}

export interface RequesterClientOptions {
  /** The gateway's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string | URL;
  /** An API key (`rqk_…`); none for a Requester with AUTH=off. */
  apiKey?: string | undefined;
  /** Time for one call of `send`, `result`, `events` or `cancel`, its retries included. Default 30 s. */
  timeoutMs?: number;
  /** How long `call()` waits for its result by default (its own `timeoutMs` wins). Default 60 s. */
  callTimeoutMs?: number;
  /** Longest `wait` of one long-poll (the gateway caps it by LONG_POLL_MAX). Default 30 s. */
  longPollMs?: number;
  /** `429` and `503` with or without `Retry-After`, and connections reset before an answer. */
  retry?: RetryOptions;
  /** Headers added to every exchange (a `traceparent`, a user agent…). */
  headers?: Record<string, string>;
  /** The `fetch` to use (default the runtime's). */
  fetch?: typeof fetch;
}

/** Options of one method call. */
export interface CallOptions {
  /** Aborts the call: the returned promise rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /**
   * Time for the whole call, retries included (for `call()`: until the result). Past it, `call()`
   * rejects with DeadlineExceededError (the request goes on), the others with a `TimeoutError`
   * DOMException.
   */
  timeoutMs?: number | undefined;
}

export interface ResultOptions extends CallOptions {
  /** Long-poll: wait up to this long for the result (ms); 0 (default) answers at once. */
  waitMs?: number;
}

export interface EventsOptions extends CallOptions {
  /** How far back to read the journal, a Go duration (`6h`); the gateway's default is 1 h. */
  since?: string;
}

const DEFAULT_RETRY: Required<RetryOptions> = { attempts: 5, minDelayMs: 250, maxDelayMs: 10_000 };

/**
 * Requester's HTTP API. Every method takes an AbortSignal and a timeout; every refusal is a typed
 * RequesterApiError (see ../errors); `429` and `503` are retried after `Retry-After` (else with
 * backoff), which is safe because a request is named by its requestId: a retry of the same request
 * is accepted as the same one.
 */
export class RequesterClient {
  readonly #base: URL;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #callTimeoutMs: number;
  readonly #longPollMs: number;
  readonly #retry: Required<RetryOptions>;

  constructor(options: RequesterClientOptions) {
    const base = new URL(options.url);
    if (!base.pathname.endsWith('/')) base.pathname = `${base.pathname}/`;
    this.#base = base;
    this.#headers = {
      ...options.headers,
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    };
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#callTimeoutMs = options.callTimeoutMs ?? 60_000;
    this.#longPollMs = options.longPollMs ?? 30_000;
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
  }

  /** Async: the request is accepted (Kafka has it); its result goes to `out`. Resolves to its requestId. */
  async send(input: RequestInput | RequestEnvelope, options: CallOptions = {}): Promise<string> {
    const envelope = withRequestId(input);
    const { sync: _sync, ...meta } = envelope.meta;
    const id = meta.requestId;
    await this.#run(options, this.#timeoutMs, async (signal) => {
      const reply = await this.#exchange('POST', 'request', signal, {
        body: { ...envelope, meta },
        requestId: id,
      });
      await expectJson(reply, 202);
    });
    return id;
  }

  /**
   * Sync: the result of the request. When the gateway answers `202` + Location (the result takes
   * longer than its SYNC_TIMEOUT), the client long-polls Location until the result or the deadline
   * (`timeoutMs`, default the client's `callTimeoutMs`), then rejects with DeadlineExceededError.
   */
  async call(input: RequestInput | RequestEnvelope, options: CallOptions = {}): Promise<ResultEnvelope> {
    const envelope = withRequestId(input);
    const id = envelope.meta.requestId;
    const timeoutMs = options.timeoutMs ?? this.#callTimeoutMs;
    const deadline = Date.now() + timeoutMs;
    try {
      return await this.#run({ ...options, timeoutMs }, timeoutMs, async (signal) => {
        const body = { ...envelope, meta: { ...envelope.meta, sync: true } };
        const reply = await this.#exchange('POST', 'request', signal, { body, requestId: id });
        if (reply.status === 200) return (await expectJson(reply, 200)) as ResultEnvelope;
        await expectJson(reply, 202);
        const location = reply.headers.get('location') ?? `/requests/${encodeURIComponent(id)}`;
        return await this.#follow(new URL(location, this.#base), id, deadline, signal);
      });
    } catch (err) {
      if (isTimeout(err) && !options.signal?.aborted) throw new DeadlineExceededError(id);
      throw err;
    }
  }

  /**
   * The result of the caller's own request `id`, or undefined while there is none (pending, unknown
   * or older than the gateway keeps). `waitMs` above 0 long-polls.
   */
  async result(id: string, options: ResultOptions = {}): Promise<ResultEnvelope | undefined> {
    const waitMs = options.waitMs ?? 0;
    return this.#run(options, this.#timeoutMs + waitMs, async (signal) => {
      const url = this.#url(`requests/${encodeURIComponent(id)}`);
      if (waitMs > 0) url.searchParams.set('wait', `${Math.ceil(waitMs)}ms`);
      return this.#poll(url, id, signal);
    });
  }

  /** The task journal of the caller's own request `id`, oldest first; [] when there is none. */
  async events(id: string, options: EventsOptions = {}): Promise<JournalEvent[]> {
    return this.#run(options, this.#timeoutMs, async (signal) => {
      const url = this.#url(`requests/${encodeURIComponent(id)}/events`);
      if (options.since !== undefined) url.searchParams.set('since', options.since);
      const reply = await this.#exchange('GET', url, signal, { requestId: id, accept: [404] });
      if (reply.status === 404) {
        await reply.arrayBuffer();
        return [];
      }
      return ((await expectJson(reply, 200)) as JournalPage).events;
    });
  }

  /**
   * Takes back the caller's own request `id`: no attempt starts after it, and its one result on
   * `out` is a `499` with `meta.error.code` `cancelled`. Rejects with NotFoundError for an id this
   * API key never sent.
   */
  async cancel(id: string, options: CallOptions = {}): Promise<CancelReceipt> {
    return this.#run(options, this.#timeoutMs, async (signal) => {
      const reply = await this.#exchange('DELETE', `requests/${encodeURIComponent(id)}`, signal, {
        requestId: id,
      });
      return (await expectJson(reply, 202)) as CancelReceipt;
    });
  }

  /** Long-polls `url` until the result or until the signal (the call's deadline) ends it. */
  async #follow(url: URL, id: string, deadline: number, signal: AbortSignal): Promise<ResultEnvelope> {
    for (;;) {
      // Ask for a little less than what is left, so that the gateway's answer beats the deadline.
      const waitMs = Math.min(this.#longPollMs, deadline - Date.now() - 500);
      if (waitMs <= 0) throw new DOMException('the call reached its deadline', 'TimeoutError');
      url.searchParams.set('wait', `${Math.floor(waitMs)}ms`);
      const asked = Date.now();
      const result = await this.#poll(url, id, signal);
      if (result) return result;
      // A gateway that answers "pending" well before the wait asked (a crowded one, a proxy's
      // timeout) is asked again after a pause, not in a tight loop.
      const early = waitMs / 2 - (Date.now() - asked);
      if (early > 0) await pause(Math.min(1_000, Math.max(250, early)), signal);
    }
  }

  async #poll(url: URL, id: string, signal: AbortSignal): Promise<ResultEnvelope | undefined> {
    const reply = await this.#exchange('GET', url, signal, { requestId: id, accept: [404] });
    if (reply.status === 200) return (await expectJson(reply, 200)) as ResultEnvelope;
    // 404 {status: "pending"} is "no result yet"; a 404 problem is a refusal (e.g. no sync-gateway).
    if (isProblem(reply)) throw await refusal(reply, id);
    await reply.arrayBuffer();
    return undefined;
  }

  /** Runs `work` under the caller's signal and a timeout. */
  async #run<T>(
    options: CallOptions,
    defaultTimeoutMs: number,
    work: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const { signal, done } = linked([options.signal], options.timeoutMs ?? defaultTimeoutMs);
    try {
      return await work(signal);
    } catch (err) {
      // fetch rejects with its own AbortError: the reason (a TimeoutError, the caller's) says why.
      if (signal.aborted) throw signal.reason;
      throw err;
    } finally {
      done();
    }
  }

  /**
   * One HTTP exchange, retried on `429`, `503` and connections lost before an answer. Statuses
   * the caller expects (2xx, and those in `accept`) are returned; any other is thrown as its
   * typed error.
   */
  async #exchange(
    method: 'GET' | 'POST' | 'DELETE',
    path: string | URL,
    signal: AbortSignal,
    options: { body?: unknown; requestId: string; accept?: number[] },
  ): Promise<Response> {
    const url = typeof path === 'string' ? this.#url(path) : path;
    const headers: Record<string, string> = { accept: 'application/json', ...this.#headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= this.#retry.attempts;
      let reply: Response;
      try {
        reply = await this.#fetch(url, { method, headers, body, signal, redirect: 'manual' });
      } catch (err) {
        if (signal.aborted || last || !isConnectionError(err)) {
          if (signal.aborted) throw signal.reason;
          throw isConnectionError(err)
            ? new ConnectionError(`${method} ${url}: ${messageOf(err)}`, { cause: err })
            : err;
        }
        await pause(this.#backoff(attempt), signal);
        continue;
      }
      if ((reply.status >= 200 && reply.status < 300) || options.accept?.includes(reply.status)) return reply;
      const error = await refusal(reply, options.requestId);
      if (last || !(reply.status === 429 || reply.status === 503)) throw error;
      await pause(this.#backoff(attempt, 'retryAfter' in error ? error.retryAfter : undefined), signal);
    }
  }

  #backoff(attempt: number, retryAfterSeconds?: number): number {
    const exponential = this.#retry.minDelayMs * 2 ** (attempt - 1) * (0.8 + Math.random() * 0.4);
    const asked = retryAfterSeconds === undefined ? 0 : retryAfterSeconds * 1000;
    return Math.min(this.#retry.maxDelayMs, Math.max(exponential, asked));
  }

  #url(path: string): URL {
    return new URL(path, this.#base);
  }
}

function isProblem(reply: Response): boolean {
  return (reply.headers.get('content-type') ?? '').startsWith('application/problem+json');
}

/** The typed error of a refusal (the body read). */
async function refusal(
  reply: Response,
  requestId: string,
): Promise<RequesterApiError | UnexpectedResponseError> {
  const text = await reply.text();
  const extra = {
    retryAfter: retryAfterSeconds(reply.headers.get('retry-after')),
    httpRequestId: reply.headers.get('x-request-id') ?? undefined,
    requestId,
  };
  const problem = parseProblem(text, reply.status);
  if (!problem)
    return new UnexpectedResponseError(reply.status, `HTTP ${reply.status}: ${text.slice(0, 200)}`);
  return problemError(problem, extra);
}

function parseProblem(text: string, status: number): Problem | undefined {
  try {
    const body = JSON.parse(text) as Partial<Problem>;
    if (typeof body.code !== 'string') return undefined;
    return {
      type: typeof body.type === 'string' ? body.type : 'about:blank',
      title: typeof body.title === 'string' ? body.title : '',
      status: typeof body.status === 'number' ? body.status : status,
      code: body.code,
      detail: typeof body.detail === 'string' ? body.detail : '',
      ...(Array.isArray(body.issues) ? { issues: body.issues } : {}),
    };
  } catch {
    return undefined;
  }
}

/** `Retry-After` in seconds: delta-seconds or an HTTP date. */
export function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}

async function expectJson(reply: Response, status: number): Promise<unknown> {
  const text = await reply.text();
  if (reply.status !== status)
    throw new UnexpectedResponseError(
      reply.status,
      `expected HTTP ${status}, got ${reply.status}: ${text.slice(0, 200)}`,
    );
  try {
    return JSON.parse(text);
  } catch {
    throw new UnexpectedResponseError(
      reply.status,
      `HTTP ${reply.status} without a JSON body: ${text.slice(0, 200)}`,
    );
  }
}

/** fetch's TypeError for a connection refused, reset or closed before an answer. */
function isConnectionError(err: unknown): boolean {
  return err instanceof TypeError;
}

function isTimeout(err: unknown): boolean {
  return err instanceof DOMException && err.name === 'TimeoutError';
}

function messageOf(err: unknown): string {
  const cause = (err as { cause?: { message?: unknown } }).cause?.message;
  return typeof cause === 'string' ? cause : err instanceof Error ? err.message : String(err);
}
