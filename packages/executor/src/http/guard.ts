import { type LookupAddress, type LookupOptions, lookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * The SSRF guard (DESIGN.md §7): targets in private, loopback, link-local and other special
 * ranges are refused unless the operator allows them (ALLOW_PRIVATE_TARGETS). Hostnames are
 * judged by the addresses they resolve to, inside the socket's own DNS lookup, so the address
 * checked is the address connected to (no second resolution an attacker's DNS could answer
 * differently). IP literals never reach a lookup, so they are checked before the call.
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

export class TargetGuard {
  private readonly allowAll: boolean;
  private readonly allowed = new BlockList();

  /** `allow`: IPs or CIDR ranges that may be called although special; `*` allows every target. */
  constructor(allow: readonly string[]) {
    this.allowAll = allow.includes('*');
    for (const item of allow) {
      if (item === '*') continue;
      const [address = '', bits] = item.split('/');
      const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.allowed.addAddress(address, family);
      else this.allowed.addSubnet(address, Number(bits), family);
    }
  }

  /** Why `address` may not be called, or undefined when it may. */
  refusal(address: string): string | undefined {
    if (this.allowAll) return undefined;
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (!SPECIAL.check(address, family) || this.allowed.check(address, family)) return undefined;
    return `target address ${address} is private, loopback, link-local or reserved (allow it with ALLOW_PRIVATE_TARGETS)`;
  }

  /** Throws a refusal for a URL whose host is an IP literal in a refused range. */
  checkUrl(url: string | URL): void {
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) === 0) return; // a name: judged by the lookup below
    const reason = this.refusal(host);
    if (reason) throw refused(reason);
  }

  /**
   * A drop-in for dns.lookup that removes refused addresses from the answer and fails when none
   * is left. Used as the socket's lookup, so every new connection (redirect hops included) passes here.
   */
  readonly lookup = (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, options.all ? [] : '');
      const usable = addresses.filter((a) => this.refusal(a.address) === undefined);
      const first = usable[0];
      if (!first) {
        const reason = this.refusal(addresses[0]?.address ?? '') ?? 'no address';
        return callback(refused(`${hostname}: ${reason}`), options.all ? [] : '');
      }
      if (options.all) callback(null, usable);
      else callback(null, first.address, first.family);
    });
  };
}

function refused(message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code: TARGET_REFUSED });
}
