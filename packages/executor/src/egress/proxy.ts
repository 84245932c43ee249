import { type AgentOptions, type ClientRequest, Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent, type AgentOptions as HttpsAgentOptions } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import type { TargetGuard } from '../http/guard.ts';

/**
 * Agents that reach targets through an HTTP proxy (EGRESS_PROXY, or a credential's own; `http://`,
 * or `https://` for TLS to the proxy itself, verified against EGRESS_PROXY_CA_FILE or the system's
 * CAs, before CONNECT or forwarding inside it): CONNECT
 * tunnels for https targets (TLS, and a client certificate, end to end with the target), request
 * forwarding for http ones. The proxy itself is allowed explicitly (the operator named it); the
 * SSRF guard still judges every target, before the proxy is asked to reach it:
 * - https: the target's name is resolved here through the guard and the tunnel asked for the
 *   address that passed (`CONNECT 203.0.113.7:443`), so the proxy cannot land anywhere else;
 * - http: the target's name is resolved here through the guard and the request refused when no
 *   address passes; the proxy then resolves the name again (a forwarding proxy takes the URL),
 *   so a name whose DNS answer changes between the two lookups is only caught here for IP
 *   literals. Run the proxy with its own egress rules, or prefer https targets.
 */

export interface ProxySettings {
  /** `http(s)://[user:pass@]host:port`; https: TLS to the proxy (the password then never travels in clear). */
  url: URL;
  /** CA certificates (PEM) to trust for an https proxy (EGRESS_PROXY_CA_FILE); default the system's. */
  ca?: string | undefined;
  guard: TargetGuard;
  /** Bound on reaching the proxy and its answer to CONNECT. */
  connectTimeoutMs: number;
}

type Callback = (err: Error | null, stream: Duplex) => void;
type ConnectOptions = Record<string, unknown>;

/** The agent's callback with an error (node:http ignores the stream then). */
const failWith = (done: Callback, err: Error) => done(err, undefined as unknown as Duplex);

/** The target's address that passes the guard (an IP literal passes through the same check). */
function guardedAddress(guard: TargetGuard, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    guard.lookupFor(port)(host.replace(/^\[(.*)\]$/, '$1'), {}, (err, address) =>
      err ? reject(err) : resolve(address as string),
    );
  });
}

function proxyAuthorization(url: URL): string | undefined {
  if (!url.username && !url.password) return undefined;
  const user = decodeURIComponent(url.username);
  const pass = decodeURIComponent(url.password);
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

/**
 * A connection to the proxy (TCP, or TLS for an https proxy), failing after `timeoutMs` if it does
 * not connect; `ready` is the event after which it carries bytes to the proxy.
 */
function dialProxy(settings: ProxySettings): { socket: Socket; ready: 'connect' | 'secureConnect' } {
  const { url } = settings;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const secure = url.protocol === 'https:';
  const socket = secure
    ? tlsConnect({
        host,
        port: Number(url.port || 443),
        ...(isIpLike(host) ? {} : { servername: host }),
        ...(settings.ca ? { ca: settings.ca } : {}),
        ALPNProtocols: ['http/1.1'],
      })
    : netConnect({ host, port: Number(url.port || 80) });
  socket.setTimeout(settings.connectTimeoutMs, () =>
    socket.destroy(
      Object.assign(new Error(`proxy ${url.host} did not answer within ${settings.connectTimeoutMs} ms`), {
        code: 'ETIMEDOUT',
      }),
    ),
  );
  return { socket, ready: secure ? 'secureConnect' : 'connect' };
}

/** Asks the proxy for a tunnel to `address:port` and resolves once it answers 2xx. */
function openTunnel(settings: ProxySettings, address: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const { socket, ready } = dialProxy(settings);
    const authority = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
    const auth = proxyAuthorization(settings.url);
    socket.once(ready, () => {
      socket.write(
        `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`,
      );
    });
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16 * 1024) fail(new Error(`proxy ${settings.url.host}: CONNECT answer too long`));
        return;
      }
      socket.off('data', onData);
      socket.off('error', fail);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString('latin1'))?.[1]);
      if (!(status >= 200 && status < 300)) {
        socket.destroy();
        return reject(
          Object.assign(
            new Error(`proxy ${settings.url.host} refused CONNECT to ${authority}: ${status || 'no status'}`),
            {
              code: 'EPROXY',
            },
          ),
        );
      }
      socket.setTimeout(0);
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    socket.on('data', onData);
    socket.once('error', fail);
  });
}

/** https targets through a CONNECT tunnel; TLS options (client certificate, CA) as for a direct agent. */
export class TunnelAgent extends HttpsAgent {
  readonly #settings: ProxySettings;

  constructor(settings: ProxySettings, options: HttpsAgentOptions) {
    super(options);
    this.#settings = settings;
  }

  override createConnection(agentOptions: object, callback?: Callback): undefined {
    const options = agentOptions as ConnectOptions;
    const host = String(options.host ?? options.hostname);
    const port = Number(options.port ?? 443);
    const done = callback as Callback;
    guardedAddress(this.#settings.guard, host, port)
      .then((address) => openTunnel(this.#settings, address, port))
      .then((socket) => {
        const servername = typeof options.servername === 'string' ? options.servername : host;
        const tls = tlsConnect({ ...options, socket, ...(isIpLike(servername) ? {} : { servername }) });
        done(null, tls);
      })
      .catch((err: Error) => failWith(done, err));
    return undefined;
  }
}

/** http targets by forwarding: the request line carries the absolute URL, sent to the proxy. */
export class ForwardAgent extends HttpAgent {
  readonly #settings: ProxySettings;

  constructor(settings: ProxySettings, options: AgentOptions) {
    super(options);
    this.#settings = settings;
  }

  addRequest(request: ClientRequest, options: ConnectOptions): void {
    const host = String(options.host ?? options.hostname);
    const port = Number(options.port ?? 80);
    const authority = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
    const internal = request as ClientRequest & { _header?: string | null; _implicitHeader(): void };
    request.path = `http://${authority}${request.path}`;
    const auth = proxyAuthorization(this.#settings.url);
    if (auth) request.setHeader('proxy-authorization', auth);
    // The header block may already be rendered with the origin-form path: render it again.
    if (internal._header) {
      internal._header = null;
      internal._implicitHeader();
    }
    (HttpAgent.prototype as unknown as { addRequest(r: ClientRequest, o: object): void }).addRequest.call(
      this,
      request,
      options,
    );
  }

  override createConnection(agentOptions: object, callback?: Callback): undefined {
    const options = agentOptions as ConnectOptions;
    const host = String(options.host ?? options.hostname);
    const port = Number(options.port ?? 80);
    const done = callback as Callback;
    guardedAddress(this.#settings.guard, host, port)
      .then(() => {
        const { socket, ready } = dialProxy(this.#settings);
        socket.once(ready, () => socket.setTimeout(0));
        done(null, socket);
      })
      .catch((err: Error) => failWith(done, err));
    return undefined;
  }
}

function isIpLike(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
