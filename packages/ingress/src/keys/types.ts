/** What an API key is and may do: its scopes, its record, what creating one takes and gives. */

/** What a key may do: checked by the ingress before anything is written to Kafka. */
export interface KeyScopes {
  /**
   * Target host patterns (`api.x.com`, `*.partner.example`), each with an optional port
   * (`127.0.0.1:8081`, `*.partner.example:443`; without one, any port); undefined = any host.
   */
  hosts?: string[];
  /**
   * Its callers may send a `Host` header naming another host than the request URI's (virtual
   * hosts behind one address); without it such a header is refused (400).
   */
  virtualHosts?: boolean;
  /** Requests per window, e.g. `200/s`, `1000/10m`; undefined = no per-key rate. */
  rate?: string;
  /** May make sync calls (`meta.sync: true`). */
  sync: boolean;
  /** May schedule beyond REDIS_HORIZON (the PostgreSQL outbox). */
  schedule: boolean;
  /** Largest request envelope (bytes); undefined = MAX_BODY_BYTES. */
  maxBodyBytes?: number;
  /** The admin API and operator UI of the admin port: `read` sees, `write` also acts; undefined = none. */
  admin?: AdminScope;
  /**
   * Records written straight to Kafka `in` may claim this key's name as `meta.client`
   * (docs/architecture.md §10): whoever the broker lets write `in` may then act as this client.
   */
  kafkaEntry: boolean;
  /** Target credentials its requests may name (`meta.credentials`); undefined = none. */
  credentials?: string[];
  /**
   * The destinations its requests may name (`meta.destination`); undefined = any, and absolute
   * URIs too. A key limited to destinations calls nothing else.
   */
  destinations?: string[];
  /**
   * The client's share of the workers relative to other clients' (the queue's weighted fair
   * share, docs/architecture.md §6), up to MAX_KEY_WEIGHT; undefined = 1.
   */
  weight?: number;
  /**
   * The most of the client's tasks in flight at once across every executor (the queue's per-client
   * cap, docs/architecture.md §6); undefined = no cap.
   */
  maxInFlight?: number;
  /**
   * The default start-by deadline of its requests that give no `meta.deadline`: a Go duration
   * counted from when the task is first due (`defaultDeadlineAt`); undefined = none.
   */
  deadline?: string;
}

/** The largest `--max-in-flight` (a sanity bound, far above any executor fleet's concurrency). */
export const MAX_KEY_IN_FLIGHT = 1_000_000;

/** The largest `--weight` (the queue's MAX_CLIENT_WEIGHT: shares are relative). */
export const MAX_KEY_WEIGHT = 1000;

export type AdminScope = 'read' | 'write';
export const ADMIN_SCOPES: readonly AdminScope[] = ['read', 'write'];

export interface KeyInfo extends KeyScopes {
  id: string;
  name: string;
  createdAt: Date;
  rotatedAt?: Date;
  revokedAt?: Date;
  /** Until when the secret replaced by the last rotation still works. */
  previousExpiresAt?: Date;
}

/** A key as the ingress checks it: the info plus the hashes of the secrets it accepts. */
export interface KeyRecord extends KeyInfo {
  secretHash: Buffer;
  previousHash?: Buffer;
}

/** A parsed `--rate`: `value` requests per `duration` (a Go duration). */
export interface KeyRate {
  value: number;
  duration: string;
}

export interface CreateKey extends Partial<KeyScopes> {
  name: string;
}

/** A key as created or rotated: the token is shown this once and never stored. */
export interface IssuedKey {
  id: string;
  name: string;
  token: string;
}
