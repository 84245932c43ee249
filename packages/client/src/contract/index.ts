/**
 * The contract's types, generated from `contracts/*.schema.json` (see `generated.ts`), and what the
 * HTTP API answers besides them. Input types describe what a caller may send: the `meta.requestId`
 * the client fills in when it is missing.
 */
import type { HttpRequest, JournalEvent, RequestEnvelope, RequestMeta } from './generated.ts';

export type * from './generated.ts';

/** `meta` as a caller writes it: every field of the contract, the requestId optional. */
export type RequestMetaInput = Omit<RequestMeta, 'requestId'> & { requestId?: string };

/**
 * A request as the client takes it: the contract's envelope, with `meta` (and its requestId)
 * optional. A missing requestId is generated once, before the first attempt, so that a retried
 * send is recognised by Requester as the same request.
 */
export interface RequestInput {
  request: HttpRequest;
  meta?: RequestMetaInput;
}

/** `202` of `DELETE /requests/{id}`: the cancel as recorded (the first one when asked again). */
export interface CancelReceipt {
  requestId: string;
  client?: string;
  /** Who took the request back: `client:<API key name>` for its owner. */
  by: string;
  /** When the cancel was recorded (RFC 3339). */
  at: string;
  /** false when the request had been cancelled already (this is that first cancel). */
  first: boolean;
}

/** `200` of `GET /requests/{id}/events`. */
export interface JournalPage {
  requestId: string;
  events: JournalEvent[];
}

export type { RequestEnvelope };
