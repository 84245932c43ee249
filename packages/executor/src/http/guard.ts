import { promises as dnsPromises, type LookupAddress, type LookupOptions, lookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { type Config, parseAddressEntry } from '@requester/shared/config';

/**
 * The SSRF guard (docs/architecture.md §7): targets in private, loopback, link-local and other special
 * ranges are refused unless the operator allows them (ALLOW_PRIVATE_TARGETS). Hostnames are
 * judged by the addresses they resolve to, inside the socket's own DNS lookup, so the address
 * checked is the address connected to (no second resolution an attacker's DNS could answer
 * differently). IP literals never reach a lookup, so they are checked before the call.
 *
 * Allow-list entries may name a port (ALLOW_PRIVATE_TARGETS=127.0.0.1:8081), so the check is on
 * address and port: the socket's lookup is made per connection with its port (index.ts).
 * Requester's own ports and its dependencies' are refused on our own addresses whatever the list
 * says (ReservedPort).
 */

/** Code carried by the error of a refused target (got copies it onto its RequestError). */
export const TARGET_REFUSED = 'ERR_TARGET_REFUSED';

const SPECIAL_IPV4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata endpoints
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];
const SPECIAL_IPV6: Array<[string, number]> = [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96], // NAT64: reaches IPv4 addresses, including private ones
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10],
  ['ff00::', 8],
];

function blockList(ranges: Array<[string, number]>, family: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  for (const [address, prefix] of ranges) list.addSubnet(address, prefix, family);
  return list;
}

// BlockList checks IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) against the IPv4 rules too.
const SPECIAL = blockList(SPECIAL_IPV4, 'ipv4');
for (const [address, prefix] of SPECIAL_IPV6) SPECIAL.addSubnet(address, prefix, 'ipv6');

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

type LookupFunction = (hostname: string, options: LookupOptions, callback: LookupCallback) => void;

/** A port of Requester itself or of one of its dependencies, refused whatever the allow list says. */
export interface ReservedPort {
  port: number;
  /** What it serves, for the refusal message: `HTTP_PORT`, `Redis`… */
  name: string;
  /** Addresses of its configured host (IP literals, names resolved at start), beyond those always ours. */
  hosts?: readonly string[];
}

/**
 * Addresses that are always "ours": loopback, the unspecified address (connecting to 0.0.0.0 or ::
 * reaches this machine), and every address of this machine's interfaces (a wildcard bind listens
 * on all of them).
 */
function ourAddresses(): BlockList {
  const list = new BlockList();
  list.addSubnet('127.0.0.0', 8, 'ipv4');
  list.addAddress('0.0.0.0', 'ipv4');
  list.addAddress('::1', 'ipv6');
  list.addAddress('::', 'ipv6');
  for (const addresses of Object.values(networkInterfaces()))
    for (const { address, family } of addresses ?? [])
      list.addAddress(address.split('%')[0] ?? address, family === 'IPv6' ? 'ipv6' : 'ipv4');
  return list;
}

/** How many answers of TargetGuard.refusal are remembered (then forgotten all at once). */
const REFUSALS_KEPT = 4_096;

const familyOf = (address: string) => (isIP(address) === 6 ? 'ipv6' : 'ipv4');
const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

export class TargetGuard {
  private readonly allowAll: boolean;
  private readonly allowedAnyPort = new BlockList();
  private readonly allowedByPort = new Map<number, BlockList>();
  /** Port -> the addresses on which it is ours (see ReservedPort), and what it serves. */
  private readonly reserved = new Map<number, { ours: BlockList; names: string[] }>();
  /** Answers of `refusal` by port and address ('' for none), REFUSALS_KEPT at most. */
  private readonly refusals = new Map<string, string>();

  /**
   * `allow`: ALLOW_PRIVATE_TARGETS entries (IPs or CIDR ranges, each with an optional port) that
   * may be called although special; `*` allows every target. `reserved`: ports refused on our own
   * addresses even so (Requester's own ports and its dependencies'): a request must not loop into
   * `/request`, read `/metrics` or speak to Redis, PostgreSQL or Kafka.
   */
  constructor(allow: readonly string[], reserved: readonly ReservedPort[] = []) {
    this.allowAll = allow.includes('*');
    for (const item of allow) {
      if (item === '*') continue;
      const entry = parseAddressEntry(item);
      if (!entry) throw new RangeError(`${JSON.stringify(item)} is not an address entry`);
      let list = this.allowedAnyPort;
      if (entry.port !== undefined) {
        list = this.allowedByPort.get(entry.port) ?? new BlockList();
        this.allowedByPort.set(entry.port, list);
      }
      if (entry.bits === undefined) list.addAddress(entry.address, entry.family);
      else list.addSubnet(entry.address, entry.bits, entry.family);
    }
    for (const { port, name, hosts = [] } of reserved) {
      if (port <= 0) continue; // a random port (0) is never one a target names
      const known = this.reserved.get(port);
      const entry = known ?? { ours: ourAddresses(), names: [] };
      entry.names.push(name);
      for (const host of hosts) if (isIP(host)) entry.ours.addAddress(host, familyOf(host));
      this.reserved.set(port, entry);
    }
  }

  /** Why `address`:`port` may not be called, or undefined when it may. */
  refusal(address: string, port: number): string | undefined {
    // The lists are fixed once built: an answer stays true. Most calls go to a few targets, whose
    // literal (or resolved) addresses would be run through three to four lists on every call.
    const key = `${port} ${address}`;
    const known = this.refusals.get(key);
    if (known !== undefined) return known || undefined;
    const reason = this.judge(address, port);
    if (this.refusals.size >= REFUSALS_KEPT) this.refusals.clear();
    this.refusals.set(key, reason ?? '');
    return reason;
  }

  private judge(address: string, port: number): string | undefined {
    const family = familyOf(address);
    const reserved = this.reserved.get(port);
    if (reserved?.ours.check(address, family))
      return `target ${address} port ${port} is Requester's own (${reserved.names.join(', ')}): never called, whatever ALLOW_PRIVATE_TARGETS says`;
    if (this.allowAll || !SPECIAL.check(address, family)) return undefined;
    if (this.allowedAnyPort.check(address, family) || this.allowedByPort.get(port)?.check(address, family))
      return undefined;
    return `target address ${address} port ${port} is private, loopback, link-local or reserved (allow it with ALLOW_PRIVATE_TARGETS)`;
  }

  /** Throws a refusal for a URL whose host is an IP literal in a refused range. */
  checkUrl(url: string | URL): void {
    // A URL is only read here: the caller's own, not a copy (a call parses its URL once).
    const parsed = typeof url === 'string' ? new URL(url) : url;
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) === 0) return; // a name: judged by the lookup below
    const reason = this.refusal(host, portOf(parsed));
    if (reason) throw refused(reason);
  }

  /**
   * A drop-in for dns.lookup, for connections to `port`, that removes refused addresses from the
   * answer and fails when none is left. Used as the socket's lookup (see the agents in index.ts),
   * so every new connection (redirect hops included) passes here.
   */
  lookupFor(port: number): LookupFunction {
    return (hostname, options, callback) => {
      lookup(hostname, { ...options, all: true }, (err, addresses) => {
        if (err) return callback(err, options.all ? [] : '');
        const usable = addresses.filter((a) => this.refusal(a.address, port) === undefined);
        const first = usable[0];
        if (!first) {
          const reason = this.refusal(addresses[0]?.address ?? '', port) ?? 'no address';
          return callback(refused(`${hostname}: ${reason}`), options.all ? [] : '');
        }
        if (options.all) callback(null, usable);
        else callback(null, first.address, first.family);
      });
    };
  }
}

function portOf(url: URL): number {
  return url.port ? Number(url.port) : (DEFAULT_PORTS[url.protocol] ?? 0);
}

function refused(message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code: TARGET_REFUSED });
}

/**
 * The listeners of this deployment, the source of every reserved port: this Requester's
 * (HTTP_PORT, ADMIN_PORT, served on HTTP_HOST), its Kafka bootstrap brokers (KAFKA_BROKERS; other
 * brokers the cluster advertises are not known here) and KRaft controllers (KAFKA_CONTROLLERS,
 * by default each bootstrap broker's port + 1), Redis and PostgreSQL, with the addresses of their
 * configured hosts. Names are resolved once, here (a name that does not resolve adds no address;
 * loopback and this machine's own addresses are refused for every reserved port anyway). Other
 * Requester processes (replicas, the other children of `--processes`) or a load balancer in
 * front of them are not known here: do not allow their addresses and ports.
 */
export async function reservedPortsOf(
  config: Pick<
    Config,
    'httpHost' | 'httpPort' | 'adminPort' | 'kafkaBrokers' | 'kafkaControllers' | 'redisUrl' | 'databaseUrl'
  >,
): Promise<ReservedPort[]> {
  const brokers = list(config.kafkaBrokers).map((broker) => hostPort(`kafka://${broker}`, 9092));
  const endpoints: Array<{ name: string; host: string; port: number }> = [
    { name: 'HTTP_PORT', host: config.httpHost, port: config.httpPort },
    { name: 'ADMIN_PORT', host: config.httpHost, port: config.adminPort },
    ...brokers.map((broker) => ({ name: 'Kafka', ...broker })),
    ...controllersOf(config.kafkaControllers, brokers).map((c) => ({ name: 'Kafka controller', ...c })),
    ...list(config.redisUrl).map((url) => ({ name: 'Redis', ...hostPort(url, 6379) })),
    { name: 'PostgreSQL', ...hostPort(config.databaseUrl, 5432) },
  ];
  return Promise.all(
    endpoints.map(async ({ name, host, port }) => ({ name, port, hosts: await addressesOf(host) })),
  );
}

/** KAFKA_CONTROLLERS, or KRaft's usual layout: each bootstrap broker's port + 1. */
function controllersOf(
  configured: readonly string[] | undefined,
  brokers: ReadonlyArray<{ host: string; port: number }>,
): Array<{ host: string; port: number }> {
  if (configured) return configured.map((controller) => hostPort(`kafka://${controller}`, 9093));
  return brokers.map(({ host, port }) => ({ host, port: port + 1 }));
}

const list = (text: string) =>
  text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  try {
    const parsed = new URL(url.includes('://') ? url : `tcp://${url}`);
    return {
      host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: parsed.port ? Number(parsed.port) : defaultPort,
    };
  } catch {
    return { host: '', port: defaultPort };
  }
}

async function addressesOf(host: string): Promise<string[]> {
  if (!host || isIP(host)) return host ? [host] : [];
  try {
    return (await dnsPromises.lookup(host, { all: true })).map((a) => a.address);
  } catch {
    return [];
  }
}
