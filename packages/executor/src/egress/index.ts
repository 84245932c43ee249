import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { TargetGuard } from '../http/guard.ts';
import type { NoProxy } from './no-proxy.ts';
import { ForwardAgent, TunnelAgent } from './proxy.ts';

export { type NoProxy, parseNoProxy } from './no-proxy.ts';

/**
 * How calls leave the process: the agents (connection pools) a call uses, chosen per target URL.
 * Direct agents run the SSRF guard as the socket's lookup; proxied ones (EGRESS_PROXY unless
 * EGRESS_NO_PROXY lists the target, or a credential's own proxy for every target) judge the
 * target before asking the proxy for it (proxy.ts). A client certificate (mTLS) lives in the https
 * agents of its credential only, so connections of two credentials never mix.
 */
export interface Agents {
  http: HttpAgent;
  https: HttpsAgent;
}

export interface Egress {
  agentsFor(url: URL): Agents;
  destroy(): void;
}

export interface EgressSettings {
  guard: TargetGuard;
  connectTimeoutMs: number;
  /** EGRESS_PROXY. */
  proxy?: string | undefined;
  /** EGRESS_PROXY_CA_FILE's certificates: trusted for https proxies (EGRESS_PROXY and credentials' own). */
  proxyCa?: string | undefined;
  /** EGRESS_NO_PROXY. */
  noProxy: NoProxy;
}

/** What a credential adds: a client certificate (and a CA to trust), a proxy of its own. */
export interface EgressIdentity {
  tls?: { cert: string; key: string; ca?: string | undefined } | undefined;
  proxy?: string | undefined;
}

/**
 * Keep-alive: most traffic goes to few partners, so reusing connections saves a handshake per call.
 * An idle connection is closed by us before the target closes it, or a call written to it as the
 * target closes it fails (the http client replays such a call once, but it costs a round trip).
 * Node's agent shortens its idle timeout to a server's `Keep-Alive: timeout=N` hint minus one
 * second, but only below the agent's own `timeout`: without one the hint is ignored. 4 s is under
 * the 5 s of Node's and Apache's servers (nginx keeps 75 s); a hint shortens it further.
 */
const KEEP_ALIVE_IDLE_MS = 4_000;
const POOL = { keepAlive: true, maxFreeSockets: 64, timeout: KEEP_ALIVE_IDLE_MS };

export function createEgress(settings: EgressSettings, identity: EgressIdentity = {}): Egress {
  const tls = identity.tls
    ? { cert: identity.tls.cert, key: identity.tls.key, ...(identity.tls.ca ? { ca: identity.tls.ca } : {}) }
    : {};
  const proxyUrl = identity.proxy ?? settings.proxy;
  let direct: Agents | undefined;
  let proxied: Agents | undefined;
  const makeDirect = (): Agents => ({
    http: guarded(new HttpAgent(POOL), settings.guard),
    https: guarded(new HttpsAgent({ ...POOL, ...tls }), settings.guard),
  });
  const makeProxied = (url: string): Agents => {
    const proxy = {
      url: new URL(url),
      guard: settings.guard,
      connectTimeoutMs: settings.connectTimeoutMs,
      ca: settings.proxyCa,
    };
    return { http: new ForwardAgent(proxy, POOL), https: new TunnelAgent(proxy, { ...POOL, ...tls }) };
  };
  return {
    agentsFor(url) {
      // A credential's own proxy takes every call of that credential; EGRESS_PROXY spares NO_PROXY.
      const viaProxy = proxyUrl !== undefined && (identity.proxy !== undefined || !settings.noProxy(url));
      if (viaProxy) {
        proxied ??= makeProxied(proxyUrl);
        return proxied;
      }
      direct ??= makeDirect();
      return direct;
    },
    destroy() {
      for (const agents of [direct, proxied]) {
        agents?.http.destroy();
        agents?.https.destroy();
      }
    },
  };
}

/**
 * The agent with the guard as the lookup of every socket it opens. Here, not as got's `dnsLookup`:
 * the guard judges address and port, and only the connection knows its port.
 */
function guarded<A extends HttpAgent>(agent: A, guard: TargetGuard): A {
  const createConnection = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback) =>
    createConnection({ ...options, lookup: guard.lookupFor(Number(options.port)) }, callback);
  return agent;
}
