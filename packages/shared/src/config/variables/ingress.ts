/** The HTTP API: listener, API keys, batching into `in`, body bounds, shutdown. */

import { z } from 'zod';
import { goDuration, port, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const ingressVariables = {
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
};
