import { type BodyBudget, type BudgetRefusal, ByteBudget } from '../body/index.ts';

/**
 * Fair at the door (docs/architecture.md §11): what an HTTP instance holds for its callers — body
 * bytes being read, callers waiting for results, journal lookups — is bounded per API key as well
 * as for the instance, so one key's abuse (stalled uploads, hundreds of long-polls) is answered to
 * that key (429) and never takes the others' share. Keys are API key ids; without a key (AUTH=off)
 * only the instance's bounds apply.
 */

/** At most `max` of something at once per key; a key's count is dropped when it returns to 0. */
export class KeySlots {
  readonly max: number;
  readonly #held = new Map<string, number>();

  constructor(max: number) {
    this.max = max;
  }

  /** A slot for `key`, or undefined when it holds `max` already; no key = always one (unbounded). */
  enter(key: string | undefined): Slot | undefined {
    if (key === undefined) return FREE;
    const held = this.#held.get(key) ?? 0;
    if (held >= this.max) return undefined;
    this.#held.set(key, held + 1);
    let left = false;
    return {
      leave: () => {
        if (left) return;
        left = true;
        const now = (this.#held.get(key) ?? 1) - 1;
        if (now > 0) this.#held.set(key, now);
        else this.#held.delete(key);
      },
    };
  }

  /** Slots `key` holds now. */
  held(key: string): number {
    return this.#held.get(key) ?? 0;
  }
}

export interface Slot {
  /** Gives the slot back (once; later calls do nothing). */
  leave(): void;
}

const FREE: Slot = { leave: () => {} };

/** The instance's budget of body bytes (MAX_BODY_BYTES_IN_FLIGHT) and each key's share of it. */
export class BodyBudgets {
  readonly #instance: ByteBudget;
  readonly #perKey: number;
  readonly #keys = new Map<string, ByteBudget>();

  constructor(instance: ByteBudget, perKeyBytes: number) {
    this.#instance = instance;
    this.#perKey = perKeyBytes;
  }

  /** The budget a body of `key` is read against: its key's share first, then the instance's. */
  of(key: string | undefined): BodyBudget {
    if (key === undefined) return this.#instance;
    return {
      take: (bytes) => {
        const share = this.#share(key);
        const mine = share.take(bytes);
        if (mine !== true) {
          this.#forgetIdle(key, share);
          return KEY_BUSY;
        }
        const all = this.#instance.take(bytes);
        if (all !== true) share.give(bytes);
        this.#forgetIdle(key, share);
        return all;
      },
      give: (bytes) => {
        this.#instance.give(bytes);
        const share = this.#keys.get(key);
        share?.give(bytes);
        if (share) this.#forgetIdle(key, share);
      },
    };
  }

  /** Bytes `key` has in flight now. */
  inUse(key: string): number {
    return this.#keys.get(key)?.inUse() ?? 0;
  }

  #share(key: string): ByteBudget {
    let share = this.#keys.get(key);
    if (!share) {
      share = new ByteBudget(this.#perKey);
      this.#keys.set(key, share);
    }
    return share;
  }

  /** Keys with nothing in flight take no memory. */
  #forgetIdle(key: string, share: ByteBudget): void {
    if (share.inUse() === 0) this.#keys.delete(key);
  }
}

const KEY_BUSY: BudgetRefusal = {
  status: 429,
  message:
    'this API key has too many request bytes in flight on this instance (MAX_BODY_BYTES_IN_FLIGHT_PER_KEY); retry later',
};

/** MAX_BODY_BYTES_IN_FLIGHT_PER_KEY: by default an eighth of the instance's, never below one body. */
export function bodyBytesPerKey(settings: {
  maxBodyBytes: number;
  maxBodyBytesInFlight: number;
  maxBodyBytesInFlightPerKey?: number | undefined;
}): number {
  const share = settings.maxBodyBytesInFlightPerKey ?? Math.floor(settings.maxBodyBytesInFlight / 8);
  return Math.max(share, settings.maxBodyBytes);
}

/** SYNC_MAX_WAITERS_PER_KEY: by default a tenth of the instance's, rounded up. */
export function waitersPerKey(settings: {
  syncMaxWaiters: number;
  syncMaxWaitersPerKey?: number | undefined;
}) {
  return settings.syncMaxWaitersPerKey ?? Math.ceil(settings.syncMaxWaiters / 10);
}
