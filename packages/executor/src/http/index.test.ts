import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallOutcome, createHttpClient, type HttpClientSettings, TargetGuard } from './index.ts';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

/** A real target on 127.0.0.1; each path plays one part. */
async function startServer(routes: Record<string, Handler>): Promise<{ url: string; server: Server }> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const handler = routes[(req.url ?? '/').split('?')[0] ?? '/'];
    if (handler) handler(req, Buffer.concat(chunks).toString('utf8'), res);
    else res.writeHead(404).end('no route');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const SETTINGS: HttpClientSettings = {
  connectTimeoutMs: 2_000,
  responseTimeoutMs: 300,
  maxResponseBytes: 64 * 1024,
  followRedirects: false,
  allowPrivateTargets: ['127.0.0.1'],
};

function failureCode(outcome: CallOutcome): string | undefined {
  return outcome.kind === 'failure' ? outcome.error.code : undefined;
}

describe('HTTP client', () => {
  let url = '';
  let server: Server;
  let redirectTo = '';
  const http = createHttpClient(SETTINGS);

  beforeAll(async () => {
    ({ url, server } = await startServer({
      '/echo': (req, body, res) =>
        res
          .writeHead(201, {
            'content-type': 'text/plain',
            'x-method': req.method ?? '',
            'set-cookie': ['a=1', 'b=2'],
          })
          .end(`${req.headers['x-test']}|${body}`),
      '/missing': (_req, _body, res) => res.writeHead(404, { 'content-type': 'text/plain' }).end('nope'),
      '/hang': () => {}, // never answers
      '/reset': (req) => req.socket.destroy(),
      '/big': (_req, _body, res) => res.writeHead(200).end('x'.repeat(100 * 1024)),
      '/big-chunked': (_req, _body, res) => {
        res.writeHead(200);
        for (let i = 0; i < 100; i++) res.write('y'.repeat(1024));
        res.end();
      },
      '/gzip': (_req, _body, res) =>
        res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync('z'.repeat(100 * 1024))),
      '/redirect': (_req, _body, res) => res.writeHead(302, { location: redirectTo }).end(),
    }));
  });
  afterAll(async () => {
    http.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('returns the status, body and headers of any answer, with the duration in ns', async () => {
    const outcome = await http.call({
      method: 'POST',
      uri: `${url}/echo`,
      headers: { 'x-test': 'hello' },
      body: '{"a":1}',
    });
    expect(outcome).toMatchObject({ kind: 'response', status: 201, body: 'hello|{"a":1}' });
    if (outcome.kind !== 'response') throw new Error('expected a response');
    expect(outcome.headers['x-method']).toBe('POST');
    expect(outcome.headers['set-cookie']).toBe('a=1, b=2');
    expect(Number.isInteger(outcome.durationNs) && outcome.durationNs > 0).toBe(true);

    expect(await http.call({ method: 'GET', uri: `${url}/missing`, headers: {} })).toMatchObject({
      kind: 'response',
      status: 404,
      body: 'nope',
    });
  });

  it('turns transport failures into coded failures: refused, reset, DNS, timeout', async () => {
    const closed = await startServer({});
    const closedUrl = closed.url;
    await new Promise((resolve) => closed.server.close(resolve));

    const refused = await http.call({ method: 'GET', uri: `${closedUrl}/`, headers: {} });
    expect(failureCode(refused)).toBe('transport_error');
    expect(refused.kind === 'failure' && refused.error.message).toMatch(/ECONNREFUSED/);

    const reset = await http.call({ method: 'GET', uri: `${url}/reset`, headers: {} });
    expect(failureCode(reset)).toBe('transport_error');

    const dns = await http.call({ method: 'GET', uri: 'http://no-such-host.invalid/', headers: {} });
    expect(failureCode(dns)).toBe('transport_error');
    expect(dns.kind === 'failure' && dns.error.message).toMatch(/ENOTFOUND|EAI_AGAIN/);

    const hang = await http.call({ method: 'GET', uri: `${url}/hang`, headers: {} });
    expect(failureCode(hang)).toBe('timeout');
    expect(hang.kind === 'failure' && hang.error.message).toBe('target did not answer within 300 ms');
  });

  it('caps the response body, declared, chunked or decompressed', async () => {
    for (const path of ['/big', '/big-chunked', '/gzip']) {
      const outcome = await http.call({ method: 'GET', uri: `${url}${path}`, headers: {} });
      expect(failureCode(outcome), path).toBe('payload_too_large');
    }
  });

  it('refuses private targets unless allowed, by literal and by resolved name', async () => {
    const strict = createHttpClient({ ...SETTINGS, allowPrivateTargets: [] });
    try {
      const port = new URL(url).port;
      for (const uri of [
        `${url}/echo`,
        `http://localhost:${port}/echo`,
        `http://[::1]:${port}/`,
        'http://169.254.169.254/',
      ]) {
        const outcome = await strict.call({ method: 'GET', uri, headers: {} });
        expect(failureCode(outcome), uri).toBe('target_refused');
        expect(outcome.kind === 'failure' && outcome.error.message, uri).toMatch(/ALLOW_PRIVATE_TARGETS/);
      }
    } finally {
      strict.close();
    }
    const open = createHttpClient({ ...SETTINGS, allowPrivateTargets: ['*'] });
    try {
      const outcome = await open.call({ method: 'GET', uri: `${url}/missing`, headers: {} });
      expect(outcome).toMatchObject({ kind: 'response', status: 404 });
    } finally {
      open.close();
    }
  });

  it('does not follow redirects by default; when it does, each hop is checked', async () => {
    redirectTo = `${url}/missing`;
    expect(await http.call({ method: 'GET', uri: `${url}/redirect`, headers: {} })).toMatchObject({
      kind: 'response',
      status: 302,
    });

    const following = createHttpClient({ ...SETTINGS, followRedirects: true });
    try {
      expect(await following.call({ method: 'GET', uri: `${url}/redirect`, headers: {} })).toMatchObject({
        kind: 'response',
        status: 404,
      });
      redirectTo = 'http://10.0.0.1/'; // private, not allowed: refused before any connection
      const outcome = await following.call({ method: 'GET', uri: `${url}/redirect`, headers: {} });
      expect(failureCode(outcome)).toBe('target_refused');
    } finally {
      following.close();
    }
  });
});

describe('target guard', () => {
  it('refuses special ranges, IPv4-mapped forms included, and lets public addresses through', () => {
    const guard = new TargetGuard(['10.1.0.0/16', '::1']);
    const refused = [
      '127.0.0.1',
      '10.2.3.4',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '0.0.0.0',
      '100.64.0.1',
    ];
    refused.push('::ffff:127.0.0.1', 'fd00::1', 'fe80::1', '::', '64:ff9b::a00:1', '224.0.0.1');
    for (const address of refused) expect(guard.refusal(address), address).toMatch(/private/);
    for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700::1111', '10.1.2.3', '::1'])
      expect(guard.refusal(address), address).toBeUndefined();
    expect(new TargetGuard(['*']).refusal('127.0.0.1')).toBeUndefined();
  });
});
