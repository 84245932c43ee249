import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { freePort } from '@requester/shared/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ConnectionError,
  DeadlineExceededError,
  DependencyUnavailableError,
  InvalidRequestError,
  RateLimitedError,
  UnexpectedResponseError,
} from '../errors/index.ts';
import { RequesterClient } from './index.ts';

/**
 * The client's HTTP behaviour against a scripted gateway on loopback: the answers Requester gives
 * that a test stack cannot be made to give on demand (429 then 202, 503 until the client gives up,
 * a proxy's HTML page). The real gateway is in packages/requester/test/e2e/client.test.ts.
 */
type Script = (req: IncomingMessage, res: ServerResponse, body: string, n: number) => void;

const problem = (res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
  res.end(JSON.stringify({ type: 'about:blank', title: 'x', status, code, detail: `${code} detail` }));
};

describe('RequesterClient over a scripted gateway', () => {
  let server: Server;
  let url: string;
  let script: Script;
  let seen: Array<{ method: string; url: string; body: string; authorization: string | undefined }>;

  beforeAll(async () => {
    const port = await freePort();
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      req.on('end', () => {
        seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          body,
          authorization: req.headers.authorization,
        });
        script(req, res, body, seen.length);
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  beforeEach(() => {
    seen = [];
  });

  const client = (attempts = 5) =>
    new RequesterClient({ url, apiKey: 'rqk_test', retry: { attempts, minDelayMs: 1, maxDelayMs: 20 } });

  it('retries a 429 after Retry-After with the same request, then returns the requestId', async () => {
    script = (_req, res, _body, n) => {
      if (n < 3) return problem(res, 429, 'rate_limited', { 'retry-after': '0' });
      res.writeHead(202, { 'content-type': 'application/json' }).end('{"requestId":"x"}');
    };
    const id = await client().send({ request: { uri: 'https://x.example' } });
    expect(seen).toHaveLength(3);
    // One requestId, generated before the first attempt: the retries are the same request.
    const ids = seen.map((s) => (JSON.parse(s.body) as { meta: { requestId: string } }).meta.requestId);
    expect(new Set(ids)).toEqual(new Set([id]));
    expect(seen[0]?.authorization).toBe('Bearer rqk_test');
  });

  it('gives up on a 503 after its attempts, with the typed error and its Retry-After', async () => {
    script = (_req, res) => problem(res, 503, 'dependency_unavailable', { 'retry-after': '0' });
    const error = await client(3)
      .send({ request: { uri: 'https://x.example' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect(error).toMatchObject({ status: 503, retryAfter: 0 });
    expect(seen).toHaveLength(3);
  });

  it('does not retry a refusal (400), and keeps its issues', async () => {
    script = (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/problem+json' });
      res.end(
        JSON.stringify({
          type: 'about:blank',
          title: 'Bad Request',
          status: 400,
          code: 'invalid_request',
          detail: 'request.uri: bad',
          issues: [{ path: 'request.uri', message: 'bad' }],
        }),
      );
    };
    const error = await client()
      .send({ request: { uri: 'https://x.example' } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect((error as InvalidRequestError).issues).toEqual([{ path: 'request.uri', message: 'bad' }]);
    expect(seen).toHaveLength(1);
  });

  it('follows 202 + Location of a sync call with long-polls until the result', async () => {
    script = (req, res, _body, n) => {
      if (req.method === 'POST') {
        res.writeHead(202, { 'content-type': 'application/json', location: '/requests/s-1' });
        return res.end('{"requestId":"s-1","status":"pending"}');
      }
      if (n < 4) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end('{"requestId":"s-1","status":"pending"}');
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ response: { status: 201, body: 'done', headers: {} }, meta: { requestId: 's-1' } }),
      );
    };
    const result = await client().call({ request: { uri: 'https://x.example' }, meta: { requestId: 's-1' } });
    expect(result.response).toMatchObject({ status: 201, body: 'done' });
    expect((JSON.parse(seen[0]?.body ?? '') as { meta: { sync: boolean } }).meta.sync).toBe(true);
    expect(seen.slice(1).map((s) => s.url.replace(/wait=\d+ms/, 'wait=…'))).toEqual([
      '/requests/s-1?wait=…',
      '/requests/s-1?wait=…',
      '/requests/s-1?wait=…',
    ]);
  });

  it('ends a sync call at its deadline with DeadlineExceededError, naming the request that goes on', async () => {
    script = (req, res) => {
      res.writeHead(req.method === 'POST' ? 202 : 404, { 'content-type': 'application/json' });
      res.end('{"requestId":"d-1","status":"pending"}');
    };
    const error = await client()
      .call({ request: { uri: 'https://x.example' }, meta: { requestId: 'd-1' } }, { timeoutMs: 1_500 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect((error as DeadlineExceededError).requestId).toBe('d-1');
    // Answered "pending" at once, the client paused between polls instead of spinning.
    expect(seen.filter((s) => s.method === 'GET').length).toBeLessThan(10);
  });

  it('aborts with the caller’s signal and its reason', async () => {
    script = () => {}; // never answers
    const controller = new AbortController();
    const sending = client().send({ request: { uri: 'https://x.example' } }, { signal: controller.signal });
    controller.abort(new Error('caller gave up'));
    await expect(sending).rejects.toThrow('caller gave up');
  });

  it('times out with a TimeoutError', async () => {
    script = () => {};
    const error = await client()
      .result('r-1', { timeoutMs: 50 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'TimeoutError' });
  });

  it('tells a foreign answer (a proxy’s page) apart from Requester’s refusals', async () => {
    script = (_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>');
    const error = await client(1)
      .cancel('r-1')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnexpectedResponseError);
    expect(error).not.toBeInstanceOf(RateLimitedError);
  });

  it('retries a refused connection, then says so', async () => {
    const closed = new RequesterClient({
      url: `http://127.0.0.1:${await freePort()}`,
      retry: { attempts: 2, minDelayMs: 1, maxDelayMs: 5 },
    });
    await expect(closed.send({ request: { uri: '' } })).rejects.toBeInstanceOf(ConnectionError);
  });
});
