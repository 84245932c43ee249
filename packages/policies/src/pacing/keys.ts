import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** The most origins each of the pacer's local maps remembers. */
export const MAX_KEYS = 10_000;

/**
 * What a pace is kept for: the origin, or the origin and a credential identity (a newline is in
 * no origin, so no origin's scope is another's). Without an identity the scope is the origin.
 */
export function scopeOf(origin: string, identity: string | undefined): string {
  return identity === undefined ? origin : `${origin}\n${identity}`;
}

/**
 * One Redis key per scope, named by a hash (origins are user input), each hashed once: a gate and
 * a report per call would hash it twice.
 */
export class PaceKeys {
  private readonly keys = new LRUCache<string, string>({ max: MAX_KEYS });
  private readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  of(scope: string): string {
    let key = this.keys.get(scope);
    if (key === undefined) {
      key = `${this.prefix}${createHash('sha256').update(scope, 'utf8').digest('hex').slice(0, 32)}`;
      this.keys.set(scope, key);
    }
    return key;
  }
}
