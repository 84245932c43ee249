import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { freePort } from './server.ts';

/**
 * Servers for the tests of target credentials (docs/architecture.md §10), all on 127.0.0.1:
 * an OAuth2 token endpoint, a target that wants its tokens or a client certificate, and a small
 * HTTP proxy (CONNECT and forwarding).
 */

async function listen(server: Server): Promise<{ port: number; close(): Promise<void> }> {
  // Node's default (5 s) closes a kept-alive connection that sat idle that long; on a loaded box a
  // test's client can send on it at that very moment and get ECONNRESET, a race between the
  // test's two ends that says nothing about what is under test. Real targets' resets are the
  // retry policy's business, tested elsewhere.
  server.keepAliveTimeout = 120_000;
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export interface TokenRequest {
  /** How the client authenticated: `basic` (Authorization header) or `post` (form fields). */
  method: 'basic' | 'post' | 'none';
  clientId: string | undefined;
  clientSecret: string | undefined;
  form: Record<string, string>;
}

/**
 * A token endpoint (client-credentials grant). It checks the client, issues random bearer tokens
 * valid for `lifetimeS` (`expires_in`), and knows which it issued: `valid(token)`. The test can
 * make it fail (`failWith = 503`), hang (`hang = true`), or expire every token issued so far.
 */
export interface TokenEndpoint {
  url: string;
  requests: TokenRequest[];
  lifetimeS: number;
  failWith: number | undefined;
  hang: boolean;
  valid(token: string | undefined): boolean;
  /** Every token issued, valid or not (tests grep outputs for them). */
  issued: string[];
  /** Every token issued so far stops being valid (the target answers 401 to it). */
  expireAll(): void;
  close(): Promise<void>;
}

export async function startTokenEndpoint(client: { id: string; secret: string }): Promise<TokenEndpoint> {
  const issued = new Set<string>();
  const held: ServerResponse[] = [];
  const endpoint = {
    requests: [] as TokenRequest[],
    issued: [] as string[],
    lifetimeS: 3600,
    failWith: undefined as number | undefined,
    hang: false,
    valid: (token: string | undefined) => token !== undefined && issued.has(token),
    expireAll: () => issued.clear(),
  };
  const server = createServer(async (req, res) => {
    const form = Object.fromEntries(new URLSearchParams(await readBody(req)));
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    let request: TokenRequest;
    if (basic) {
      const [id, secret] = Buffer.from(basic, 'base64').toString('utf8').split(':').map(decodeURIComponent);
      request = { method: 'basic', clientId: id, clientSecret: secret, form };
    } else if (form.client_id !== undefined) {
      request = { method: 'post', clientId: form.client_id, clientSecret: form.client_secret, form };
    } else request = { method: 'none', clientId: undefined, clientSecret: undefined, form };
    endpoint.requests.push(request);
    const reply = (status: number, body: object) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (endpoint.hang) return void held.push(res);
    if (endpoint.failWith) return reply(endpoint.failWith, { error: 'temporarily_unavailable' });
    if (form.grant_type !== 'client_credentials') return reply(400, { error: 'unsupported_grant_type' });
    if (request.clientId !== client.id || request.clientSecret !== client.secret)
      return reply(401, { error: 'invalid_client' });
    const token = `at-${randomBytes(16).toString('hex')}`;
    issued.add(token);
    endpoint.issued.push(token);
    reply(200, { access_token: token, token_type: 'Bearer', expires_in: endpoint.lifetimeS });
  });
  const { port, close } = await listen(server);
  return Object.assign(endpoint, {
    url: `http://127.0.0.1:${port}/oauth/token`,
    close: () => {
      for (const res of held) res.destroy();
      return close();
    },
  });
}

export interface ProtectedTarget {
  url: string;
  /** Calls answered 200, and 401s. */
  ok: number;
  unauthorized: number;
  /** The client certificate subjects (CN) the target saw, one per call (mTLS targets). */
  clientNames: string[];
  close(): Promise<void>;
}

/**
 * A target that answers 200 only to `Authorization: Bearer <token the endpoint issued>` (when
 * `tokens` is given) and, over TLS with `tls.requireClientCert`, only to a client certificate its
 * CA signed (otherwise the handshake fails).
 */
export async function startProtectedTarget(options: {
  tokens?: TokenEndpoint;
  tls?: { cert: string; key: string; ca: string };
}): Promise<ProtectedTarget> {
  const target = { ok: 0, unauthorized: 0, clientNames: [] as string[] };
  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    await readBody(req);
    if (options.tls) {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      target.clientNames.push(String(peer.subject?.CN ?? ''));
    }
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (options.tokens && !options.tokens.valid(token)) {
      target.unauthorized++;
      res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' });
      return res.end();
    }
    target.ok++;
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('welcome');
  };
  const server = options.tls
    ? createHttpsServer(
        {
          cert: options.tls.cert,
          key: options.tls.key,
          ca: options.tls.ca,
          requestCert: true,
          rejectUnauthorized: true,
        },
        handler,
      )
    : createServer(handler);
  const { port, close } = await listen(server as Server);
  return Object.assign(target, { url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/`, close });
}

export interface TestProxy {
  url: string;
  /** `host:port` of every CONNECT, in order. */
  tunnels: string[];
  /** Absolute URLs of every forwarded request, in order. */
  forwarded: string[];
  /** Proxy-Authorization headers seen. */
  authorizations: string[];
  close(): Promise<void>;
}

/**
 * A small HTTP proxy: CONNECT tunnels and absolute-form forwarding, recording what it was asked.
 * With `tls`, an https proxy (TLS to the proxy itself, the tunnel inside it); `tlsHandshakes`
 * then counts the clients that completed one.
 */
export async function startConnectProxy(
  options: { tls?: { cert: string; key: string } } = {},
): Promise<TestProxy & { tlsHandshakes: number }> {
  const proxy = {
    tunnels: [] as string[],
    forwarded: [] as string[],
    authorizations: [] as string[],
    tlsHandshakes: 0,
  };
  const sockets = new Set<Socket>();
  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers['proxy-authorization']) proxy.authorizations.push(req.headers['proxy-authorization']);
    proxy.forwarded.push(req.url ?? '');
    const url = new URL(req.url ?? '');
    const body = await readBody(req);
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    const upstream = await fetch(url, {
      method: req.method ?? 'GET',
      headers: headers as Record<string, string>,
      ...(body ? { body } : {}),
    }).catch(() => undefined);
    if (!upstream) {
      res.writeHead(502);
      return res.end();
    }
    res.writeHead(upstream.status, Object.fromEntries(upstream.headers));
    res.end(Buffer.from(await upstream.arrayBuffer()));
  };
  const server = options.tls
    ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, handler)
    : createServer(handler);
  server.on('secureConnection', () => {
    proxy.tlsHandshakes++;
  });
  server.on('connect', (req, client: Socket, head: Buffer) => {
    if (req.headers['proxy-authorization']) proxy.authorizations.push(req.headers['proxy-authorization']);
    proxy.tunnels.push(req.url ?? '');
    const [host, port] = (req.url ?? '').replace(/^\[(.*)\](:\d+)$/, '$1$2').split(/:(?=\d+$)/);
    const upstream = connect(Number(port), host ?? '', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    upstream.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'));
    client.on('error', () => upstream.destroy());
  });
  const { port, close } = await listen(server as Server);
  return Object.assign(proxy, {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return close();
    },
  });
}
