import net from 'node:net';
import path from 'node:path';

/**
 * Sends the connections a process opens to some broker addresses to other addresses (a fault
 * proxy). A TCP proxy given as KAFKA_BROKERS alone is bypassed after the first metadata response,
 * which advertises the broker's own address; rerouting at connect time covers every kafkajs client
 * of the process, the fetcher included, without touching the shared broker or production code.
 * kafkajs opens its sockets with `net.connect`, which is looked up at each call, so wrapping it is
 * enough; Redis and PostgreSQL clients connect to other ports and pass through unchanged.
 */
export type BrokerRoutes = Record<string, string>;

/** The variable the preload reads: `from=to` pairs of `host:port`, comma separated. */
export const KAFKA_ROUTE_VARIABLE = 'REQUESTER_TEST_KAFKA_ROUTE';

const PRELOAD = path.join(import.meta.dirname, 'kafka-route-preload.ts');

type Connect = (...args: unknown[]) => net.Socket;
const unrouted = net.connect as unknown as Connect;

/** Reroutes `net.connect` in this process until the returned function is called. */
export function routeConnections(routes: BrokerRoutes): () => void {
  const table = new Map(Object.entries(routes).map(([from, to]) => [from, splitHostPort(to)]));
  const routed: Connect = (...args) => {
    const [options] = args;
    if (typeof options === 'object' && options !== null && 'port' in options) {
      const { host = 'localhost', port } = options as { host?: string; port: number | string };
      const to = table.get(`${host}:${port}`);
      if (to) args[0] = { ...options, host: to.host, port: to.port };
    }
    return unrouted.apply(net, args);
  };
  (net as unknown as { connect: Connect }).connect = routed;
  return () => {
    (net as unknown as { connect: Connect }).connect = unrouted;
  };
}

/**
 * The environment of a child process (`spawnRequester`) whose Kafka connections go by `routes`:
 * the preload below, loaded with `--import` before the service's own modules.
 */
export function kafkaRouteEnv(routes: BrokerRoutes): Record<string, string> {
  return {
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${PRELOAD}`.trim(),
    [KAFKA_ROUTE_VARIABLE]: Object.entries(routes)
      .map(([from, to]) => `${from}=${to}`)
      .join(','),
  };
}

/** Parses the variable's `from=to,…` into routes. */
export function parseBrokerRoutes(value: string): BrokerRoutes {
  return Object.fromEntries(
    value
      .split(',')
      .map((pair) => pair.trim())
      .filter(Boolean)
      .map((pair) => pair.split('=', 2) as [string, string]),
  );
}

function splitHostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
}
