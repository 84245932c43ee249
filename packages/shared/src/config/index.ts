/**
 * The one configuration schema. Every setting is an environment variable (the same name is
 * documented in the README table, generated from `CONFIG_VARIABLES` below); CLI flags override
 * the environment. Validation happens once at start; a bad value fails with the variable's name.
 *
 * @module
 */

import { isIP } from 'node:net';
import { z } from 'zod';
import { ConfigError } from '../errors/index.ts';
import { durationToMs } from '../time/duration.ts';

const goDuration = z.string().transform((text, ctx) => {
  try {
    return durationToMs(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return z.NEVER;
  }
});
const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const nonNegativeInt = z.coerce.number().int().min(0);
/**
 * One entry of ALLOW_PRIVATE_TARGETS: an IP or CIDR range, optionally with a port (`127.0.0.1:8081`,
 * `10.0.0.0/8:443`, `[::1]:8080`, `[fc00::/7]:443`: IPv6 with a port in brackets). No port = any.
 */
export interface AddressEntry {
  address: string;
  family: 'ipv4' | 'ipv6';
  /** Prefix length; undefined = this address alone. */
  bits: number | undefined;
  /** undefined = every port. */
  port: number | undefined;
}

/** The entry `text` stands for, or undefined when it is not one (`*` is not an entry). */
export function parseAddressEntry(text: string): AddressEntry | undefined {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  const withPort = bracketed ? undefined : /^([\d./]+):(\d+)$/.exec(text); // IPv4 only: IPv6 needs brackets
  const range = bracketed?.[1] ?? withPort?.[1] ?? text;
  const portText = bracketed?.[2] ?? withPort?.[2];
  const [address = '', bits, extra] = range.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined || (bracketed && family !== 6)) return undefined;
  const maxBits = family === 6 ? 128 : 32;
  if (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= maxBits)) return undefined;
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && !(port >= 1 && port <= 65535)) return undefined;
  return {
    address,
    family: family === 6 ? 'ipv6' : 'ipv4',
    bits: bits === undefined ? undefined : Number(bits),
    port,
  };
}

/** Comma-separated address entries (see parseAddressEntry), or `*`; empty = none. */
const addressList = z.string().transform((text, ctx) => {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  for (const item of items) {
    if (item !== '*' && !parseAddressEntry(item)) {
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(item)} is not an IP or CIDR range (with an optional :port; IPv6 as [addr]:port), or *`,
      });
    }
  }
  return items;
});
/** Comma-separated `host:port` (IPv6 as `[addr]:port`); at least one. */
const hostPortList = z
  .string()
  .transform((text) =>
    text
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean),
  )
  .refine(
    (items) => items.length > 0 && items.every((item) => /^(\[[^\]]+\]|[^:[\]\s]+):\d{1,5}$/.test(item)),
    {
      message: 'must be host:port entries, comma-separated (IPv6 as [addr]:port)',
    },
  );

/**
 * Comma-separated limiter keys (`meta.limiter.key`: printable ASCII without spaces, at most 256
 * characters each); empty = none.
 */
const limiterKeyList = z.string().transform((text, ctx) => {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  for (const item of items) {
    if (!/^[\x21-\x7e]{1,256}$/.test(item))
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(item)} is not a limiter key (printable ASCII without spaces, at most 256 characters)`,
      });
  }
  return new Set(items) as ReadonlySet<string>;
});
/** Comma-separated credential names (1-64 letters, digits, '.', '_', '-'); empty = none. */
const credentialNameList = z.string().transform((text, ctx) => {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  for (const item of items) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(item))
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(item)} is not a credential name` });
  }
  return new Set(items) as ReadonlySet<string>;
});
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => ['true', '1', 'yes'].includes(v));

/**
 * A configured secret. It prints, logs and serializes as `[redacted]` (pino, JSON.stringify,
 * util.inspect, `requester config --effective`); only `reveal()` gives the text. Its schema never
 * fails: loadConfig's error message quotes the raw value, so a secret is validated by its user
 * (e.g. the executor parses SIGNING_KEYS at start) with errors that never echo it.
 */
export class SecretText {
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  reveal(): string {
    return this.#text;
  }

  toJSON(): string {
    return '[redacted]';
  }

  toString(): string {
    return '[redacted]';
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return '[redacted]';
  }
}
const secretText = z.string().transform((text) => new SecretText(text));

const REDACTED = '[redacted]';
/**
 * Each URL of a text after its `//`, up to a list separator. Not cut at the path: a password
 * written with an unencoded `/` must not leak (an `@` later in a path over-masks, which is harmless).
 */
const URL_AUTHORITY = /\/\/([^,\s]*)/g;

/**
 * A configuration value as it may be shown (`requester config --effective`, error messages): a
 * SecretText as `[redacted]`, and in text the password of every URL (`scheme://user:password@host`,
 * also with an empty user as in `redis://:password@host`, and each seed of a comma-separated list)
 * replaced by `[redacted]`. Other values pass unchanged.
 */
export function redactConfigValue(value: unknown): unknown {
  if (value instanceof SecretText) return REDACTED;
  if (typeof value !== 'string') return value;
  return value.replace(URL_AUTHORITY, (whole, authority: string) => {
    const at = authority.lastIndexOf('@');
    const colon = authority.indexOf(':');
    if (at < 0 || colon < 0 || colon > at) return whole;
    return `//${authority.slice(0, colon + 1)}${REDACTED}${authority.slice(at)}`;
  });
}

interface VariableSpec {
  env: string;
  default: string | undefined;
  description: string;
  schema: z.ZodType;
}

function variable<S extends z.ZodType>(
  env: string,
  defaultValue: string | undefined,
  schema: S,
  description: string,
) {
  return { env, default: defaultValue, schema, description } as const;
}

/** Every setting: env name, default (as text, the way a user would write it), meaning. */
export const CONFIG_VARIABLES = {
  logLevel: variable(
    'LOG_LEVEL',
    'info',
    z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']),
    'pino log level',
  ),
  kafkaBrokers: variable(
    'KAFKA_BROKERS',
    '127.0.0.1:9092',
    z.string().min(1),
    'comma-separated Kafka bootstrap brokers',
  ),
  kafkaControllers: variable(
    'KAFKA_CONTROLLERS',
    undefined,
    hostPortList.optional(),
    "comma-separated KRaft controller listeners (host:port) of the Kafka cluster, which clients never use but a request could reach: refused as targets like the brokers. Default: each bootstrap broker's host at its port + 1 (infra/kafka.sh's layout, e.g. 9093 beside 9092)",
  ),
  kafkaClientId: variable(
    'KAFKA_CLIENT_ID',
    'requester',
    z.string().min(1),
    'Kafka client id (suffixed by role)',
  ),
  kafkaRouterGroup: variable(
    'KAFKA_ROUTER_GROUP',
    undefined,
    z.string().min(1).optional(),
    'consumer group of the routers on KAFKA_TOPIC_IN. Default: `<KAFKA_CLIENT_ID>-router` for the default `requester.in`, else `<KAFKA_CLIENT_ID>-router.<KAFKA_TOPIC_IN>`, so that two deployments on one broker with other topics never share a group (a member of a shared group is assigned partitions of the other deployment’s topic and leaves them unread)',
  ),
  topicIn: variable('KAFKA_TOPIC_IN', 'requester.in', z.string().min(1), 'topic of incoming requests'),
  topicOut: variable('KAFKA_TOPIC_OUT', 'requester.out', z.string().min(1), 'topic of results'),
  topicDlq: variable(
    'KAFKA_TOPIC_DLQ',
    'requester.dlq',
    z.string().min(1),
    'topic of dead-lettered requests',
  ),
  topicEvents: variable(
    'KAFKA_TOPIC_EVENTS',
    'requester.events',
    z.string().min(1),
    'topic of the task journal (one event per step of a request, keyed by requestId; `requester trace`)',
  ),
  topicBodies: variable(
    'KAFKA_TOPIC_BODIES',
    undefined,
    z.string().min(1).optional(),
    'topic of the routers’ copies of big `in` records that an outside producer batched with others (ROUTER_BODY_COPIES), each in a record batch of its own, for the executors to read by offset; nothing consumes it, its retention must match `in`’s. Default: `<KAFKA_TOPIC_IN>.bodies`',
  ),
  kafkaEntry: variable(
    'KAFKA_ENTRY',
    'enforce',
    z.enum(['enforce', 'report']),
    'what the router does with a record written straight to in that claims a meta.client not allowed for Kafka entry: enforce answers it forbidden and dead-letters it; report lets it through and only logs and counts it (requester_router_refused_claims_total{action="reported"}), for the rolling upgrade from a version whose ingresses did not sign their records (docs/architecture.md §10)',
  ),
  kafkaAnonymousCredentials: variable(
    'KAFKA_ANONYMOUS_CREDENTIALS',
    '',
    credentialNameList,
    'credentials (comma-separated names: `meta.credentials` or `meta.signing.keyId`) that a record written straight to in may name without claiming a client, or under a client whose key does not list them: every producer the broker lets write in may then make calls with them. Any other credential on a record written straight to in needs its meta.client to be a key allowed for Kafka entry whose credentials scope lists it (the router answers the rest forbidden and dead-letters it, like a refused claim; KAFKA_ENTRY=report only logs them)',
  ),
  events: variable(
    'EVENTS',
    'all',
    z.enum(['off', 'failures', 'all']),
    'task journal: all = every step of every request; failures = only the requests that left the first-attempt-success path (held, retried, outboxed, failed); off = none',
  ),
  topicPartitions: variable(
    'KAFKA_TOPIC_PARTITIONS',
    '12',
    positiveInt,
    'partitions of the topics Requester creates',
  ),
  topicReplication: variable(
    'KAFKA_TOPIC_REPLICATION',
    '1',
    positiveInt,
    'replication factor of the topics Requester creates',
  ),
  kafkaMaxMessageBytes: variable(
    'KAFKA_MAX_MESSAGE_BYTES',
    '10485760',
    positiveInt,
    'max.message.bytes of the topics Requester creates (a 1 MiB body grows when JSON-escaped); a result bigger than this answers 502 payload_too_large',
  ),
  kafkaSessionTimeout: variable(
    'KAFKA_SESSION_TIMEOUT',
    '10s',
    goDuration.refine((ms) => ms >= 6_000, 'must be at least 6s (the broker refuses shorter sessions)'),
    'consumer group session of routers and sync-gateways: how long a dead member (a killed process, or one lost in a broker crash) holds its partitions before the group moves on',
  ),
  kafkaSsl: variable(
    'KAFKA_SSL',
    'false',
    bool,
    'TLS to the Kafka brokers (the system CAs are trusted, or KAFKA_SSL_CA)',
  ),
  kafkaSslCa: variable(
    'KAFKA_SSL_CA',
    undefined,
    z.string().optional(),
    'PEM file of the CA certificates to trust for the Kafka brokers (implies KAFKA_SSL)',
  ),
  kafkaSaslMechanism: variable(
    'KAFKA_SASL_MECHANISM',
    undefined,
    z.enum(['plain', 'scram-sha-256', 'scram-sha-512']).optional(),
    'SASL authentication to Kafka: plain, scram-sha-256 or scram-sha-512 (use TLS with plain); unset = none',
  ),
  kafkaSaslUsername: variable('KAFKA_SASL_USERNAME', undefined, z.string().optional(), 'SASL user name'),
  kafkaSaslPassword: variable(
    'KAFKA_SASL_PASSWORD',
    undefined,
    secretText.optional(),
    'SASL password. Never printed',
  ),
  createTopics: variable('KAFKA_CREATE_TOPICS', 'true', bool, 'create missing topics at start'),
  kafkaProduceTimeout: variable(
    'KAFKA_PRODUCE_TIMEOUT',
    '10s',
    goDuration,
    'bound on one produce (ack from the broker)',
  ),
  redisUrl: variable(
    'REDIS_URL',
    'redis://127.0.0.1:6379',
    z.string().min(1),
    'Redis URL; several comma-separated seeds = Redis Cluster',
  ),
  redisCluster: variable('REDIS_CLUSTER', 'false', bool, 'treat REDIS_URL as Redis Cluster seeds'),
  redisPrefix: variable('REDIS_PREFIX', 'rq', z.string().min(1).max(32), 'prefix of every Redis key'),
  redisCommandTimeout: variable('REDIS_COMMAND_TIMEOUT', '5s', goDuration, 'bound on one Redis command'),
  queueShards: variable('QUEUE_SHARDS', '128', positiveInt, 'number of Redis queue shards (hash-tagged)'),
  queueInlineBytes: variable(
    'QUEUE_INLINE_BYTES',
    '1024',
    nonNegativeInt,
    'an `in` record of at most this many bytes rides in its Redis task, so the executor skips reading it back from Kafka (Redis memory per queued task grows by up to this much; 0 = always read from Kafka)',
  ),
  queueDedupWindow: variable(
    'QUEUE_DEDUP_WINDOW',
    '1h',
    goDuration,
    'how long an acked task id stays refused (replays of in; ~112 B of Redis per id), and how long the ingress remembers which request a requestId names (a different one is a 409; ~170 B of Redis per id)',
  ),
  queueHighWatermark: variable(
    'QUEUE_HIGH_WATERMARK',
    '1000000',
    nonNegativeInt,
    'pending tasks in the Redis queue at which routers pause consuming in (Kafka keeps the backlog; ~400 B of Redis per task); 0 = never',
  ),
  queueLowWatermark: variable(
    'QUEUE_LOW_WATERMARK',
    undefined,
    nonNegativeInt.optional(),
    'pending tasks at or below which paused routers resume; default 80% of QUEUE_HIGH_WATERMARK',
  ),
  routerBodyCopies: variable(
    'ROUTER_BODY_COPIES',
    'true',
    bool,
    'a record of `in` of 8 KiB or more that its producer wrote in a record batch over 64 KiB with other records is copied by the router to KAFKA_TOPIC_BODIES, alone in its batch, and its task points there: the executor then reads that record, not the whole batch (docs/architecture.md §9). Upgrade executors before routers: an older executor would send such a task’s retries to the bodies topic',
  ),
  routerBreakerPauseAfter: variable(
    'ROUTER_BREAKER_PAUSE_AFTER',
    '0s',
    goDuration,
    "routers pause consuming in while a target origin's circuit breaker has been open longer than this; 0 = never (in is not split by origin: a pause holds back every origin)",
  ),
  routerBackpressureInterval: variable(
    'ROUTER_BACKPRESSURE_INTERVAL',
    '1s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how often routers sample the queue depth and open breakers for backpressure',
  ),
  metricsSampleInterval: variable(
    'METRICS_SAMPLE_INTERVAL',
    '10s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how often routers sample queue depths and the consumer lag of in, and relays the outbox backlog, into /metrics',
  ),
  databaseUrl: variable(
    'DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/requester',
    z.string().min(1),
    'PostgreSQL URL (outbox); the database is created when missing',
  ),
  pgPoolMax: variable('PG_POOL_MAX', '10', positiveInt, 'PostgreSQL pool size'),
  pgStatementTimeout: variable('PG_STATEMENT_TIMEOUT', '10s', goDuration, 'bound on one SQL statement'),
  httpHost: variable('HTTP_HOST', '127.0.0.1', z.string().min(1), 'address the ingress HTTP API listens on'),
  httpPort: variable('HTTP_PORT', '8080', port, 'port of the ingress HTTP API (ingress, sync-gateway)'),
  httpKeepAliveTimeout: variable(
    'HTTP_KEEP_ALIVE_TIMEOUT',
    '65s',
    goDuration,
    "how long the HTTP API keeps a caller's idle connection open for its next request; keep it longer than the idle timeout of every client and load balancer in front (60 s for most), so that the server is never the side that closes a connection a client is about to reuse (the client would see ECONNRESET)",
  ),
  ingressLinger: variable(
    'INGRESS_LINGER',
    '2ms',
    goDuration,
    'how long the ingress holds accepted requests to send them to `in` in one produce while an earlier produce is in flight (none in flight: sent at once); each caller is answered when its batch is acked',
  ),
  ingressBatchBytes: variable(
    'INGRESS_BATCH_BYTES',
    '262144',
    positiveInt,
    'bytes of accepted requests after which the ingress sends its batch to `in` without waiting for INGRESS_LINGER',
  ),
  auth: variable(
    'AUTH',
    'on',
    z.enum(['on', 'off']),
    'API keys on the HTTP API (`requester keys create`); `off` lets every caller in without a key and is logged as a warning at start',
  ),
  authCacheTtl: variable(
    'AUTH_CACHE_TTL',
    '5s',
    goDuration,
    'how long an ingress trusts an API key it read from PostgreSQL: a revoked or rotated-out key stops working everywhere within this',
  ),
  bootstrapAdminKey: variable(
    'BOOTSTRAP_ADMIN_KEY',
    undefined,
    secretText.optional(),
    '`requester migrate` creates the first admin key (admin write, named `admin`) from this token when no key named `admin` ever existed (a revoked one stays revoked): make the token with `requester keys token` or openssl (README, Deploy), keep it in a Secret. Never printed',
  ),
  cliActor: variable(
    'CLI_ACTOR',
    undefined,
    z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9@._-]{0,99}$/, 'letters, digits, @ . _ -, at most 100')
      .optional(),
    'who runs admin commands, as operator actions record it (`cli:<CLI_ACTOR>`); unset = `cli:<os user>@<host name>` (in a container: the pod or container name). Set it when you exec into a pod, e.g. `kubectl exec … -- env CLI_ACTOR=alice requester queue purge`',
  ),
  adminPort: variable(
    'ADMIN_PORT',
    '9464',
    port,
    'port of /healthz, /readyz and /metrics, the operator UI (/ui) and the admin API (/admin/api); internal: /metrics names every API key, and nothing there is for callers',
  ),
  adminSessionTtl: variable(
    'ADMIN_SESSION_TTL',
    '8h',
    goDuration.refine((ms) => ms >= 60_000, 'must be at least 1m'),
    'how long an operator UI login lasts (its session ends sooner at logout, or when its API key is revoked or rotated away)',
  ),
  adminTrustProxy: variable(
    'ADMIN_TRUST_PROXY',
    'false',
    bool,
    'the admin port is reached through a TLS-terminating proxy that sets X-Forwarded-Proto: a login it marks https gets a Secure session cookie (the admin port itself speaks plain HTTP)',
  ),
  maxBodyBytes: variable(
    'MAX_BODY_BYTES',
    '1048576',
    positiveInt,
    'largest accepted request envelope (HTTP 413 above)',
  ),
  maxBodyBytesInFlight: variable(
    'MAX_BODY_BYTES_IN_FLIGHT',
    '67108864',
    positiveInt,
    'bytes of request bodies one ingress reads and handles at once, until Kafka has them (the heap holds a few times that: raw, text, parsed, re-serialized); a body that finds them taken is cut off with 503 + Retry-After',
  ),
  maxBodyBytesInFlightPerKey: variable(
    'MAX_BODY_BYTES_IN_FLIGHT_PER_KEY',
    undefined,
    positiveInt.optional(),
    "bytes of request bodies one API key may have in flight on one ingress (inside MAX_BODY_BYTES_IN_FLIGHT), so that one key's stalled or slow uploads cannot take the others' share: beyond it that key's body is cut off with 429 + Retry-After; default MAX_BODY_BYTES_IN_FLIGHT / 8, never below MAX_BODY_BYTES (AUTH=off: no per-key share)",
  ),
  shutdownTimeout: variable('SHUTDOWN_TIMEOUT', '30s', goDuration, 'bound on graceful shutdown before exit'),
  cancelRetention: variable(
    'CANCEL_RETENTION',
    '168h',
    goDuration,
    'how long a cancel (DELETE /requests/{id}, `requester cancel`) is remembered: a copy of the request met later than this (an ordered task still blocked, a retry due later) runs (~150 B of Redis per cancel)',
  ),
  redisHorizon: variable(
    'REDIS_HORIZON',
    '1s',
    goDuration,
    'tasks due within this go to Redis; later ones to the outbox',
  ),
  maxWorkers: variable('MAX_WORKERS', '32', positiveInt, 'concurrent HTTP calls per executor process'),
  maxWorkersPerOrigin: variable(
    'MAX_WORKERS_PER_ORIGIN',
    undefined,
    positiveInt.optional(),
    'calls in flight to one target origin (scheme://host:port) per executor process (per cluster with ORIGIN_CONCURRENCY_SCOPE=cluster), so a target that hangs cannot hold every worker; a task over the cap waits up to 50 ms for a freed slot in its worker, then parked in its executor without a worker (up to 30 s, within EXECUTOR_PARKED_TASKS), else in the queue (not an attempt, counted in waitTime); default MAX_WORKERS / 4 rounded up (8 with 32)',
  ),
  originConcurrencyScope: variable(
    'ORIGIN_CONCURRENCY_SCOPE',
    'process',
    z.enum(['process', 'cluster']),
    'where MAX_WORKERS_PER_ORIGIN is counted: `process` (each executor alone, free) or `cluster` (every executor together, slots leased in Redis: one more round trip per lease batch)',
  ),
  adaptiveConcurrency: variable(
    'ADAPTIVE_CONCURRENCY',
    'true',
    bool,
    "learn each target origin's concurrency limit (shared in Redis): +1 per round of calls while the recent latency stays within 1.5× its floor (the latency without load, measured again every 10 s by a probe at one call per executor) + 1 ms + the executor's own event-loop lag, down by up to as much (by how far past that bound) when a queue forms at the target, −30 % on timeouts and 5xx; MAX_WORKERS_PER_ORIGIN is its ceiling. false = the cap is MAX_WORKERS_PER_ORIGIN alone. The pace a target asks for (429/503 + Retry-After, RateLimit headers) is honoured either way",
  ),
  executorLeaseTtl: variable(
    'EXECUTOR_LEASE_TTL',
    '30s',
    goDuration,
    'lease of a task being executed; renewed every third of it, reclaimed by others when it lapses',
  ),
  executorParkedTasks: variable(
    'EXECUTOR_PARKED_TASKS',
    '1000',
    positiveInt,
    "tasks an executor keeps parked at most: a task the pace books a slot up to 30 s ahead for (or a retry due within 30 s, one a busy breaker refused, or one its origin's bulkhead refused, until a slot frees) waits in its executor under its lease, holding no worker and counted apart from the leases of the tasks being worked on, instead of going back to the queue (one lease per request, not two); beyond this (or EXECUTOR_PARKED_BYTES) it goes back to the queue",
  ),
  executorParkedBytes: variable(
    'EXECUTOR_PARKED_BYTES',
    '33554432',
    positiveInt,
    'bytes of `in` records and queued tasks the parked tasks of an executor hold at most (see EXECUTOR_PARKED_TASKS); a task that would go beyond goes back to the queue',
  ),
  executorRecordCacheBytes: variable(
    'EXECUTOR_RECORD_CACHE_BYTES',
    '33554432',
    nonNegativeInt,
    'bytes of `in` records an executor keeps after reading them by offset (a batch brings neighbours, retries re-read); 0 = none',
  ),
  targetConnectTimeout: variable(
    'TARGET_CONNECT_TIMEOUT',
    '5s',
    goDuration,
    'bound on DNS lookup, TCP connect and TLS handshake with a target',
  ),
  targetResponseTimeout: variable(
    'TARGET_RESPONSE_TIMEOUT',
    '30s',
    goDuration,
    "bound on waiting for a target's response headers, and again on reading its body (504 beyond)",
  ),
  targetMaxResponseBytes: variable(
    'TARGET_MAX_RESPONSE_BYTES',
    '10485760',
    positiveInt,
    'largest target response body kept (decompressed); larger ones answer 502 payload_too_large',
  ),
  targetFollowRedirects: variable(
    'TARGET_FOLLOW_REDIRECTS',
    'false',
    bool,
    'follow 3xx redirects of targets (each hop checked like the first); off = the 3xx is the result',
  ),
  allowPrivateTargets: variable(
    'ALLOW_PRIVATE_TARGETS',
    '',
    addressList,
    "private/loopback/link-local targets that may be called: comma-separated IPs or CIDRs, each with an optional port (`127.0.0.1:8081`, `10.0.0.0/8:443`, `[::1]:8080`; none = any port), or * for all. Requester's own HTTP_PORT and ADMIN_PORT and its Kafka (brokers and KAFKA_CONTROLLERS), Redis and PostgreSQL ports are refused on loopback, this machine's addresses and their configured hosts whatever this says",
  ),
  breakerFailureThreshold: variable(
    'BREAKER_FAILURE_THRESHOLD',
    '5',
    positiveInt,
    'consecutive failures (transport error, timeout, 5xx, 429, 408) that open the circuit breaker of a target origin',
  ),
  breakerOpenDuration: variable(
    'BREAKER_OPEN_DURATION',
    '30s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how long an opened breaker refuses calls before one probe may go; doubles after each failed probe',
  ),
  breakerMaxOpenDuration: variable(
    'BREAKER_MAX_OPEN_DURATION',
    '5m',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'cap on the open period of a breaker whose probes keep failing',
  ),
  originFailingHoldAfter: variable(
    'ORIGIN_FAILING_HOLD_AFTER',
    '1h',
    goDuration,
    'a target origin that has failed this long without a success (breaker failures: transport error, timeout, 5xx, 408) is held back: its tasks wait without spending attempts, one probe per BREAKER_MAX_OPEN_DURATION checks it, and it resumes when a probe succeeds (an `origin_failing` journal event, requester_origin_failing_origins); 0 = never by time',
  ),
  originFailingHoldFailures: variable(
    'ORIGIN_FAILING_HOLD_FAILURES',
    '0',
    nonNegativeInt,
    'a target origin whose breaker has counted this many failures in a row (probes included) is held back as with ORIGIN_FAILING_HOLD_AFTER, whichever comes first; 0 = never by count',
  ),
  originOptOut: variable(
    'ORIGIN_OPT_OUT',
    'true',
    bool,
    "honour a receiver's `webhook-delivery: disable` response header: its origin is held back at once (no probe) until an operator runs `requester breakers reset <origin>`; false = the header is ignored",
  ),
  breakerStateCache: variable(
    'BREAKER_STATE_CACHE',
    '500ms',
    goDuration,
    'how long an executor trusts a breaker state it read from Redis (0 = read it for every call)',
  ),
  pacingFreeFor: variable(
    'PACING_FREE_FOR',
    '1s',
    goDuration,
    "how long an executor calls an origin known free (unpaced, not held, no probe of its latency floor under way) without asking its pace in Redis first: each answer's report renews it, and a hold, a pace or a probe set by any executor ends it at once (announced on a pub/sub channel; no permission while the executor's subscriber connection is down). The dispatches are counted with the next report. 0 = every call asks (one more Redis round trip per call)",
  ),
  retryAfterMax: variable(
    'RETRY_AFTER_MAX',
    '1h',
    goDuration,
    "longest Retry-After of a target that is honoured (a retry waits the longer of its backoff and the target's Retry-After, capped here; may exceed meta.retry.maxDelay). Requests of API keys without the schedule scope have every wait capped at REDIS_HORIZON instead",
  ),
  sharedLimiterKeys: variable(
    'SHARED_LIMITER_KEYS',
    '',
    limiterKeyList,
    "limiter keys that are one quota for every caller (comma-separated `meta.limiter.key` values, e.g. a partner's quota): every request naming one, whichever API key sent it, spends and waits on the same limiter. Any other limiter key is its caller's own (the client namespace): another caller using the same name has a limiter of its own. Only the operator declares a key shared; a caller cannot",
  ),
  limiterDispatchBudget: variable(
    'LIMITER_DISPATCH_BUDGET',
    '20s',
    goDuration,
    'the latest a call rate-limited by a `sliding-window-log` leaves after its limiter decision: its slot is counted as sent at the end of this budget until the executor says when the request was really written (two-phase take), so the limit holds at the target whatever the gap between decision and send. Keep it above 5s + 3 × TARGET_CONNECT_TIMEOUT (a call not started within 5s gives its slot back; a later send is still counted, from its real instant, and counted in limiter_late_dispatch_total). A larger budget costs nothing but the slot of a call lost with its executor, held until then. 0 = counted at the decision (a window of send times may then hold more than the limit)',
  ),
  limiterArrivalMargin: variable(
    'LIMITER_ARRIVAL_MARGIN',
    '50ms',
    goDuration,
    "how much later than its send a `sliding-window-log` slot is counted, for the target's side of the wire: the limit holds by send time exactly, and a partner counting by arrival sees each call after a transit that varies from call to call (network, its own scheduling); a slot held this much longer keeps a window of arrivals within the limit while that variation stays under it. Costs at most margin ÷ window of the rate (50 ms of a 1 s window: 5 %). 0 = counted at the send",
  ),
  cacheWaitBudget: variable(
    'CACHE_WAIT_BUDGET',
    '10s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how long a cache miss waits for another executor filling the same key before calling the target itself',
  ),
  cacheMaxEntryBytes: variable(
    'CACHE_MAX_ENTRY_BYTES',
    '262144',
    positiveInt,
    'largest response stored in the cache (status, headers and body as JSON); larger 2xx answers pass uncached',
  ),
  signingKeys: variable(
    'SIGNING_KEYS',
    '',
    secretText,
    'deprecated (signing keys now live in the credential store: `requester credentials create <id> --signing-secret-file`, or `requester credentials import-signing` to move these): request signing keys `id=whsec_<base64>` (Standard Webhooks) or `id=hex:…`/`base64:…`/`text:…` (X-Signature HMAC), `;`-separated; an id listed twice signs with both (rotation). Used for key ids the store does not know; the executor warns at start. Never printed',
  ),
  credentialsMasterKey: variable(
    'CREDENTIALS_MASTER_KEY',
    undefined,
    secretText.optional(),
    'master keys of the credential store (`requester credentials`): `<id>:<base64 of 32 bytes>`, comma-separated; the first wraps new data keys, the others only unwrap (rotation: put the new key first, run `requester credentials rewrap`, then drop the old one). Unset = no credentials. Never printed',
  ),
  credentialsMasterKeyFile: variable(
    'CREDENTIALS_MASTER_KEY_FILE',
    undefined,
    z.string().optional(),
    'a file holding what CREDENTIALS_MASTER_KEY would (e.g. a mounted secret); set one of the two',
  ),
  credentialsCacheTtl: variable(
    'CREDENTIALS_CACHE_TTL',
    '5s',
    goDuration,
    'how long an executor or ingress trusts a credential it read from PostgreSQL: a revoked or rotated credential is dropped everywhere within this',
  ),
  oauth2TokenTimeout: variable(
    'OAUTH2_TOKEN_TIMEOUT',
    '10s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'bound on fetching an OAuth2 access token (credentials with `oauth2`), the wait for another executor fetching it included; past it the attempt fails with `credential_unavailable`',
  ),
  egressProxy: variable(
    'EGRESS_PROXY',
    undefined,
    z.string().url().optional(),
    'HTTP proxy for every call to a target (`http://[user:pass@]host:port`, or `https://…` for TLS to the proxy itself, then CONNECT or forwarding inside it): CONNECT for https targets, forwarding for http ones. The SSRF guard still judges each target; the proxy itself is allowed. Unset = direct',
  ),
  egressProxyCaFile: variable(
    'EGRESS_PROXY_CA_FILE',
    undefined,
    z.string().optional(),
    "a PEM file of CA certificates trusted for an https proxy (EGRESS_PROXY, or a credential's own) instead of the system's",
  ),
  egressNoProxy: variable(
    'EGRESS_NO_PROXY',
    '',
    z.string(),
    'comma-separated hosts called directly despite EGRESS_PROXY: a name matches itself and its subdomains (`example.com`, `.example.com`), `*` matches all, an entry may carry a port (`host:8443`)',
  ),
  syncTimeout: variable(
    'SYNC_TIMEOUT',
    '25s',
    goDuration,
    'how long a sync call waits before 202 + Location',
  ),
  // 32 MiB, not 64: all roles in one process at ~2,000 results/s, 64 MiB took ~100,000 results
  // (minutes of a steady load) to fill, and RSS climbed burst after burst until then, which an
  // operator reads as a leak; 32 MiB is full within ~20 s there, and holds every result of the
  // last SYNC_CACHE_TTL up to ~120 results/s.
  syncCacheMaxBytes: variable(
    'SYNC_CACHE_MAX_BYTES',
    '33554432',
    positiveInt,
    'bytes of results the sync-gateway keeps for callers that ask after the fact (LRU; result JSON + ~256 B per entry); a bigger result still answers the callers waiting for it, but is not kept',
  ),
  syncMaxWaiters: variable(
    'SYNC_MAX_WAITERS',
    '10000',
    positiveInt,
    'callers one sync-gateway holds waiting at once (sync calls and long-polls); beyond it a sync call gets 202 + Location at once and a long-poll 503 + Retry-After',
  ),
  syncMaxWaitersPerKey: variable(
    'SYNC_MAX_WAITERS_PER_KEY',
    undefined,
    positiveInt.optional(),
    "callers of one API key one sync-gateway holds waiting at once (inside SYNC_MAX_WAITERS): beyond it that key's sync call gets 202 + Location at once and its long-poll 429 + Retry-After; default SYNC_MAX_WAITERS / 10 rounded up (1000 with 10000)",
  ),
  eventsMaxLookupsPerKey: variable(
    'EVENTS_MAX_LOOKUPS_PER_KEY',
    '4',
    positiveInt,
    'GET /requests/{id}/events lookups of one API key one sync-gateway runs at once (each reads a partition of the journal topic); beyond it that key gets 429 + Retry-After',
  ),
  syncCacheTtl: variable(
    'SYNC_CACHE_TTL',
    '5m',
    goDuration,
    'how long the sync-gateway keeps a result for callers that ask after the fact',
  ),
  syncFollowOut: variable(
    'SYNC_FOLLOW_OUT',
    'true',
    bool,
    'how sync results reach the gateways (set it alike on gateways and executors). Sync calls are answered through Redis sharded pub/sub to the gateway that took them either way. true: each sync-gateway also reads all of `out`, so a long-poll on any gateway sees every result, async ones included, but with N gateways every result is read N times (N² reads when gateways grow with callers). false: a gateway reads only its own channel, and executors also keep each sync result in Redis for SYNC_CACHE_TTL, where a long-poll on any gateway finds it (re-read every second while it waits); long-polls of async requests get 404 pending',
  ),
  longPollMax: variable(
    'LONG_POLL_MAX',
    '60s',
    goDuration,
    'cap on the `wait` of GET /requests/{id} (longer asks are shortened to this)',
  ),
  relayWorkers: variable('RELAY_WORKERS', '2', positiveInt, 'concurrent outbox claimers per relay process'),
  relayBatch: variable('RELAY_BATCH', '500', positiveInt, 'outbox rows moved to Kafka per transaction'),
  relayStageAhead: variable(
    'RELAY_STAGE_AHEAD',
    '60s',
    goDuration,
    'how long before its due time an outbox row is moved to the Redis queue (through in), where it waits for its instant: many rows due at one instant (a "send at 09:00" campaign) are all staged by then instead of drained after it. Staged tasks count toward QUEUE_HIGH_WATERMARK, and a staged task of an ordered partition holds the later arrivals of its partition behind it from then on; 0 = a row moves when it is due',
  ),
  otelEndpoint: variable(
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    undefined,
    z.string().url().optional(),
    'OTLP/HTTP endpoint for traces; unset = no export',
  ),
} satisfies Record<string, VariableSpec>;

type Variables = typeof CONFIG_VARIABLES;
export type Config = { [K in keyof Variables]: z.output<Variables[K]['schema']> };
export type ConfigOverrides = Partial<Record<keyof Variables, string>>;

/**
 * Reads the configuration from `env` (default `process.env`) with `overrides` (CLI flags) on top.
 * Throws one ConfigError listing every bad variable by name.
 */
/** The routers' consumer group (KAFKA_ROUTER_GROUP, or the default derived from the deployment's topic). */
export function routerGroupOf(
  config: Pick<Config, 'kafkaRouterGroup' | 'kafkaClientId' | 'topicIn'>,
): string {
  if (config.kafkaRouterGroup) return config.kafkaRouterGroup;
  const base = `${config.kafkaClientId}-router`;
  return config.topicIn === CONFIG_VARIABLES.topicIn.default ? base : `${base}.${config.topicIn}`;
}

/** The topic of the routers' copies of big batched `in` records (KAFKA_TOPIC_BODIES, or `<KAFKA_TOPIC_IN>.bodies`). */
export function bodiesTopicOf(config: Pick<Config, 'topicBodies' | 'topicIn'>): string {
  return config.topicBodies ?? `${config.topicIn}.bodies`;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, spec] of Object.entries(CONFIG_VARIABLES) as Array<[keyof Variables, VariableSpec]>) {
    const raw = overrides[key] ?? nonEmpty(env[spec.env]) ?? spec.default;
    const parsed = spec.schema.safeParse(raw);
    if (parsed.success) values[key] = parsed.data;
    else
      problems.push(
        `${spec.env}=${JSON.stringify(redactConfigValue(raw))}: ${parsed.error.issues.map((i) => i.message).join(', ')}`,
      );
  }
  if (problems.length > 0)
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, { problems });
  return values as Config;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** The README configuration table (kept in sync by `pnpm run docs:check`). */
export function configMarkdownTable(): string {
  const rows = Object.values(CONFIG_VARIABLES).map(
    (spec: VariableSpec) =>
      `| \`${spec.env}\` | ${spec.default === undefined ? '—' : `\`${spec.default}\``} | ${spec.description} |`,
  );
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}
