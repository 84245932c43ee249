/**
 * @module
 * Routing of sync results to the sync-gateway holding their caller. The ingress stamps a sync
 * request's `in` record with the id of its process's gateway
 * (a Kafka header: set by the service, never taken from the caller, and outside the JSON
 * contract); the executor, after writing the result to `out`, publishes it on that gateway's
 * channel with Redis sharded pub/sub, so each gateway reads only its own callers' results.
 */
import { randomBytes } from 'node:crypto';
import { headerText, type RecordHeaders } from '../kafka/types.ts';

/** The `in` record header naming the gateway waiting for the result. */
export const REPLY_TO_HEADER = 'requester-reply-to';

/** A gateway's id: random per process, so a restarted gateway never receives its predecessor's replies. */
export function newGatewayId(): string {
  return randomBytes(8).toString('hex');
}

/** The reply-to of a fetched `in` record, when it has one. */
export function replyToHeader(headers: RecordHeaders | undefined): string | undefined {
  return headerText(headers, REPLY_TO_HEADER) || undefined;
}

/**
 * The gateway's sharded pub/sub channel. The hash tag puts it in one slot: on a cluster, SPUBLISH
 * reaches only the shard owning it (plain PUBLISH is broadcast to every node).
 */
export function replyChannel(prefix: string, gatewayId: string): string {
  return `${prefix}:reply:{${gatewayId}}`;
}

/**
 * Where a sync result is kept for long-polls on any gateway (SYNC_FOLLOW_OUT=false), by its id:
 * the requestId in its client's namespace (`clientScoped(meta.client, requestId)`).
 */
export function resultKey(prefix: string, resultId: string): string {
  return `${prefix}:result:{${resultId}}`;
}
