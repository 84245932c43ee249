import { createServer, get as httpGet, IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BlockList } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { parseRequestEnvelope } from '@requester/shared/contract';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createEgress, parseNoProxy } from '../egress/index.ts';
import {
  type CallOutcome,
  createHttpClient,
  type HttpClientSettings,
  reservedPortsOf,
  TargetGuard,
} from './index.ts';
import { toHttpCall } from './request.ts';

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
      // "é" split across two writes: the body is decoded whole, not chunk by chunk.
      '/split': (_req, _body, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const bytes = Buffer.from('caf\u00e9 au lait', 'utf8');
        res.write(bytes.subarray(0, 4));
        setTimeout(() => res.end(bytes.subarray(4)), 20);
      },
      // Headers and part of the body, then the connection is cut.
      '/cut': (_req, _body, res) => {
        res.writeHead(200, { 'content-length': '1000' });
        res.write('x'.repeat(100));
        setTimeout(() => res.socket?.destroy(), 20);
      },
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

  it("bounds a call by its own shorter timeout, never by a longer one than the client's", async () => {
    const short = await http.call({ method: 'GET', uri: `${url}/hang`, headers: {}, timeoutMs: 40 });
    expect(failureCode(short)).toBe('timeout');
    expect(short.kind === 'failure' && short.error.message).toBe(
      "target did not answer within the call's timeout of 40 ms",
    );
    const long = await http.call({ method: 'GET', uri: `${url}/hang`, headers: {}, timeoutMs: 60_000 });
    expect(long.kind === 'failure' && long.error.message).toBe('target did not answer within 300 ms');
  });

  it('caps the response body, declared, chunked or decompressed', async () => {
    for (const path of ['/big', '/big-chunked', '/gzip']) {
      const outcome = await http.call({ method: 'GET', uri: `${url}${path}`, headers: {} });
      expect(failureCode(outcome), path).toBe('payload_too_large');
    }
  });

  it('reads a body of several chunks whole, by its events (no async iterator per call)', async () => {
    const iterator = vi.spyOn(Readable.prototype, Symbol.asyncIterator);
    try {
      const outcome = await http.call({ method: 'GET', uri: `${url}/split`, headers: {} });
      expect(outcome).toMatchObject({ kind: 'response', status: 200, body: 'caf\u00e9 au lait' });
      const one = await http.call({
        method: 'POST',
        uri: `${url}/echo`,
        headers: { 'x-test': 't' },
        body: 'b',
      });
      expect(one).toMatchObject({ kind: 'response', status: 201, body: 't|b' });
      // The target reads its requests so (IncomingMessage); the client's response stream is not read so.
      expect(iterator.mock.contexts.filter((stream) => !(stream instanceof IncomingMessage))).toEqual([]);
    } finally {
      iterator.mockRestore();
    }
    const cut = await http.call({ method: 'GET', uri: `${url}/cut`, headers: {} });
    expect(failureCode(cut)).toBe('transport_error');
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

  it('judges address and port, by literal and by resolved name; our own ports are refused even with *', async () => {
    const port = Number(new URL(url).port);
    const other = await startServer({ '/echo': (_req, _body, res) => res.writeHead(200).end('other') });
    const otherPort = new URL(other.url).port;
    const client = createHttpClient({
      ...SETTINGS,
      allowPrivateTargets: [`127.0.0.1:${otherPort}`],
    });
    const own = createHttpClient({
      ...SETTINGS,
      allowPrivateTargets: ['*'],
      reservedPorts: [{ port, name: 'HTTP_PORT' }],
    });
    try {
      for (const uri of [`${other.url}/echo`, `http://localhost:${otherPort}/echo`])
        expect(await client.call({ method: 'GET', uri, headers: {} }), uri).toMatchObject({ status: 200 });
      for (const uri of [`${url}/echo`, `http://localhost:${port}/echo`]) {
        const outcome = await client.call({ method: 'GET', uri, headers: {} });
        expect(failureCode(outcome), uri).toBe('target_refused');
      }
      for (const uri of [`${url}/echo`, `http://localhost:${port}/echo`, `http://[::1]:${port}/`]) {
        const outcome = await own.call({ method: 'GET', uri, headers: {} });
        expect(failureCode(outcome), uri).toBe('target_refused');
        expect(outcome.kind === 'failure' && outcome.error.message, uri).toMatch(/Requester's own/);
      }
      expect(await own.call({ method: 'GET', uri: `${other.url}/echo`, headers: {} })).toMatchObject({
        status: 200,
      });
    } finally {
      client.close();
      own.close();
      other.server.close();
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
      // A signed call (or one with a credential) keeps its origin: the 3xx is its result.
      redirectTo = `${url}/missing`;
      const signed = toHttpCall(
        parseRequestEnvelope({
          request: { uri: `${url}/redirect` },
          meta: { requestId: 'signed-1', signing: { keyId: 'hooks' } },
        }),
      );
      expect(signed.keepOrigin).toBe(true);
      expect(await following.call(signed)).toMatchObject({ kind: 'response', status: 302 });
    } finally {
      following.close();
    }
  });
});

describe('kept-alive connections the target closes', () => {
  /**
   * A target that answers the first request of each connection and drops the connection when a
   * second one arrives on it: what a call sees when it reuses a connection just as the target's
   * idle timeout closes it.
   */
  let url = '';
  let server: Server;
  const seen: string[] = [];
  const served = new WeakSet<object>();
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(`${req.method} ${req.headers['idempotency-key'] ?? '-'}`);
      req.resume();
      if (served.has(req.socket)) return void req.socket.destroy();
      served.add(req.socket);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('fresh');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const twice = async (method: string, headers: Record<string, string> = {}) => {
    const http = createHttpClient(SETTINGS);
    seen.length = 0;
    try {
      const first = await http.call({ method, uri: `${url}/`, headers, body: 'b' });
      const second = await http.call({ method, uri: `${url}/`, headers, body: 'b' });
      return { first, second, seen: [...seen] };
    } finally {
      http.close();
    }
  };

  it('replays a GET on a fresh connection', async () => {
    const { first, second, seen } = await twice('GET');
    expect(first.kind).toBe('response');
    expect(second).toMatchObject({ kind: 'response', status: 200, body: 'fresh' });
    expect(seen).toEqual(['GET -', 'GET -', 'GET -']);
  });

  it('replays a POST that carries an Idempotency-Key, with the same key', async () => {
    const { second, seen } = await twice('POST', { 'Idempotency-Key': 'k-1' });
    expect(second).toMatchObject({ kind: 'response', status: 200 });
    expect(seen).toEqual(['POST k-1', 'POST k-1', 'POST k-1']);
  });

  it('does not replay a POST without one: the target may have acted on it', async () => {
    const { second, seen } = await twice('POST');
    expect(failureCode(second)).toBe('transport_error');
    expect(seen).toEqual(['POST -', 'POST -']);
  });

  it('closes an idle connection before the target does: a second under its Keep-Alive hint, else 4 s', async () => {
    const idleTimeouts = async (keepAliveTimeout: number) => {
      const hinting = createServer((_req, res) => res.end('ok'));
      hinting.keepAliveTimeout = keepAliveTimeout;
      await new Promise<void>((resolve) => hinting.listen(0, '127.0.0.1', resolve));
      const egress = createEgress({
        guard: new TargetGuard(['127.0.0.1']),
        connectTimeoutMs: 1_000,
        noProxy: parseNoProxy(''),
      });
      const target = new URL(`http://127.0.0.1:${(hinting.address() as AddressInfo).port}/`);
      const agent = egress.agentsFor(target).http;
      try {
        await new Promise<void>((resolve, reject) =>
          httpGet(target, { agent }, (res) => res.resume().on('end', resolve)).on('error', reject),
        );
        await new Promise((resolve) => setImmediate(resolve)); // the socket goes back to the pool
        return Object.values(agent.freeSockets).flatMap((sockets) => (sockets ?? []).map((s) => s.timeout));
      } finally {
        egress.destroy();
        hinting.closeAllConnections();
        await new Promise((resolve) => hinting.close(resolve));
      }
    };
    expect(await idleTimeouts(3_000)).toEqual([2_000]); // `Keep-Alive: timeout=3`
    expect(await idleTimeouts(60_000)).toEqual([4_000]);
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
    for (const address of refused) expect(guard.refusal(address, 443), address).toMatch(/private/);
    for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700::1111', '10.1.2.3', '::1'])
      expect(guard.refusal(address, 443), address).toBeUndefined();
    expect(new TargetGuard(['*']).refusal('127.0.0.1', 443)).toBeUndefined();
  });

  it('judges an address and port once: the same answer again without the lists', () => {
    const guard = new TargetGuard(['127.0.0.1:8081']);
    const check = vi.spyOn(BlockList.prototype, 'check');
    try {
      expect(guard.refusal('127.0.0.1', 8081)).toBeUndefined();
      expect(guard.refusal('127.0.0.1', 8082)).toMatch(/private/);
      const judged = check.mock.calls.length;
      expect(judged).toBeGreaterThan(0);
      for (let i = 0; i < 3; i++) {
        expect(guard.refusal('127.0.0.1', 8081)).toBeUndefined();
        expect(guard.refusal('127.0.0.1', 8082)).toMatch(/private/);
      }
      expect(check.mock.calls.length).toBe(judged);
      expect(guard.refusal('127.0.0.2', 8081)).toMatch(/private/);
      expect(check.mock.calls.length).toBeGreaterThan(judged);
    } finally {
      check.mockRestore();
    }
  });

  it('allows an entry with a port on that port only; one without a port on every port', () => {
    const guard = new TargetGuard(['127.0.0.1:8081', '10.0.0.0/8:443', '[::1]:8080', '192.168.1.1']);
    const allowed: Array<[string, number]> = [
      ['127.0.0.1', 8081],
      ['::ffff:127.0.0.1', 8081],
      ['10.2.3.4', 443],
      ['::1', 8080],
      ['192.168.1.1', 22],
    ];
    const refused: Array<[string, number]> = [
      ['127.0.0.1', 8082],
      ['127.0.0.2', 8081],
      ['10.2.3.4', 80],
      ['::1', 8081],
    ];
    for (const [address, port] of allowed)
      expect(guard.refusal(address, port), `${address} ${port}`).toBeUndefined();
    for (const [address, port] of refused)
      expect(guard.refusal(address, port), `${address} ${port}`).toMatch(/private/);
  });

  it("refuses Requester's own ports on its own addresses whatever the list says, and only there", () => {
    const reserved = [
      { port: 8080, name: 'HTTP_PORT' },
      { port: 6379, name: 'Redis', hosts: ['10.9.9.9'] },
    ];
    const machine = Object.values(networkInterfaces())
      .flat()
      .map((i) => i?.address)
      .filter((a): a is string => a !== undefined);
    for (const guard of [
      new TargetGuard(['127.0.0.1', '10.0.0.0/8'], reserved),
      new TargetGuard(['*'], reserved),
    ]) {
      for (const address of [
        '127.0.0.1',
        '127.5.5.5',
        '0.0.0.0',
        '::1',
        '::',
        '::ffff:127.0.0.1',
        ...machine,
      ])
        expect(guard.refusal(address, 8080), address).toMatch(/Requester's own \(HTTP_PORT\)/);
      expect(guard.refusal('10.9.9.9', 6379)).toMatch(/Requester's own \(Redis\)/);
      expect(guard.refusal('127.0.0.1', 6379)).toMatch(/Requester's own/);
      // Not ours: a partner elsewhere on the private network may use the same port numbers.
      expect(guard.refusal('10.9.9.8', 6379)).toBeUndefined();
      expect(guard.refusal('10.1.1.1', 8080)).toBeUndefined();
      expect(guard.refusal('127.0.0.1', 8081)).toBeUndefined();
    }
  });

  it('reads the reserved ports from the configuration, resolving host names', async () => {
    const reserved = await reservedPortsOf({
      httpHost: '0.0.0.0',
      httpPort: 8080,
      adminPort: 9464,
      kafkaBrokers: 'localhost:19092, 10.0.0.7:9093',
      kafkaControllers: undefined,
      redisUrl: 'redis://10.0.0.8:6380,redis://10.0.0.9',
      databaseUrl: 'postgres://u:secret@[fd00::5]/db',
    });
    expect(reserved.map(({ name, port }) => `${name}:${port}`)).toEqual([
      'HTTP_PORT:8080',
      'ADMIN_PORT:9464',
      'Kafka:19092',
      'Kafka:9093',
      'Kafka controller:19093',
      'Kafka controller:9094',
      'Redis:6380',
      'Redis:6379',
      'PostgreSQL:5432',
    ]);
    expect(reserved[2]?.hosts).toContain('127.0.0.1'); // localhost, resolved
    expect(reserved[3]?.hosts).toEqual(['10.0.0.7']);
    expect(reserved[5]?.hosts).toEqual(['10.0.0.7']);
    expect(reserved[8]?.hosts).toEqual(['fd00::5']);
  });

  it('takes the KRaft controllers from KAFKA_CONTROLLERS when it is set', async () => {
    const reserved = await reservedPortsOf({
      httpHost: '127.0.0.1',
      httpPort: 8080,
      adminPort: 9464,
      kafkaBrokers: '10.0.0.7:9092',
      kafkaControllers: ['10.0.0.20:9193', '[fd00::6]:9193'],
      redisUrl: 'redis://10.0.0.8:6379',
      databaseUrl: 'postgres://10.0.0.9/db',
    });
    const controllers = reserved.filter((r) => r.name === 'Kafka controller');
    expect(controllers).toEqual([
      { name: 'Kafka controller', port: 9193, hosts: ['10.0.0.20'] },
      { name: 'Kafka controller', port: 9193, hosts: ['fd00::6'] },
    ]);
  });
});
