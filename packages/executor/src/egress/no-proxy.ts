import { isIP } from 'node:net';

/**
 * EGRESS_NO_PROXY, the usual NO_PROXY shape: comma-separated entries, each `*` (everything), a
 * host name (itself and every name under it; a leading `.` means the same), or an IP literal;
 * any of them may carry a port (`host:8443`, `[::1]:8080`), which then must match too.
 */
export type NoProxy = (url: URL) => boolean;

interface Entry {
  host: string;
  port?: number;
}

export function parseNoProxy(text: string): NoProxy {
  const entries: Entry[] = [];
  let all = false;
  for (const raw of text.split(',')) {
    const item = raw.trim().toLowerCase();
    if (item === '') continue;
    if (item === '*') {
      all = true;
      continue;
    }
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(item);
    const hostPort = /^([^:]+):(\d+)$/.exec(item);
    if (bracketed) entries.push(withPort(bracketed[1] as string, bracketed[2]));
    else if (hostPort && isIP(item) === 0) entries.push(withPort(hostPort[1] as string, hostPort[2]));
    else entries.push({ host: item });
  }
  return (url) => {
    if (all) return true;
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
    const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    return entries.some((e) => (e.port === undefined || e.port === port) && hostMatches(e.host, host));
  };
}

function withPort(host: string, port: string | undefined): Entry {
  return port === undefined ? { host } : { host, port: Number(port) };
}

function hostMatches(entry: string, host: string): boolean {
  const bare = entry.startsWith('.') ? entry.slice(1) : entry;
  if (isIP(host) !== 0 || isIP(bare) !== 0) return host === bare;
  return host === bare || host.endsWith(`.${bare}`);
}
