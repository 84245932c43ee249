// Where a task's request comes from: its `in` record (or the copy riding inline in the task), read and parsed.
import {
  errorResult,
  invalidRequestResult,
  type RequestContract,
  type RequestEnvelope,
  type ResultEnvelope,
} from '@requester/shared/contract';
import type { Fetcher, FetchOutcome, KafkaRef } from '@requester/shared/kafka';
import { replyToHeader } from '@requester/shared/replies';
import { decodeQueuedTask, type InlineRecord, type QueuedTask } from '@requester/shared/task';
import type { Job, Settlement } from './settlement.ts';

/** A record's request, or the result answering a record that holds none. */
export type Parsed = { ok: true; envelope: RequestEnvelope } | { ok: false; result: ResultEnvelope };

/**
 * Each job's record, in the jobs' order: inline tasks carry theirs; the others are read from `in`
 * in one batched fetch.
 */
export async function readSources(
  fetcher: Pick<Fetcher, 'fetchMany'>,
  jobs: Job[],
): Promise<Array<FetchOutcome | undefined>> {
  const reads = jobs.filter((job) => !job.task.inline);
  const read = reads.length > 0 ? await fetcher.fetchMany(reads.map((job) => job.task.ref)) : [];
  const fetched = new Map(reads.map((job, i) => [job, read[i]]));
  return jobs.map((job) =>
    job.task.inline ? inlineOutcome(job.task.ref, job.task.inline) : fetched.get(job),
  );
}

/**
 * An inline task's record, as if read from `in`, for its headers: the value rides parsed in the
 * task (attempt validates it from there), and the key only a record read back needs.
 */
function inlineOutcome(ref: KafkaRef, inline: InlineRecord): FetchOutcome {
  const record = { ref, key: null, value: null, headers: inline.headers ?? {}, timestamp: '' };
  return { ok: true, record };
}

/** A delivery carries its `in` record's reply-to header (only a record read can have one). */
export function withReplyTo(settlement: Settlement, fetched: FetchOutcome | undefined): Settlement {
  if (settlement.kind !== 'deliver' || !fetched?.ok) return settlement;
  const replyTo = replyToHeader(fetched.record.headers);
  return replyTo ? { ...settlement, replyTo } : settlement;
}

/** The envelope of a record, or the invalid_request result answering it (keyed by the task's requestId). */
export function parseRecord(
  contract: RequestContract,
  value: Buffer | null,
  requestId: string,
  tryCount: number,
): Parsed {
  let input: unknown;
  try {
    input = JSON.parse(value?.toString('utf8') ?? '');
  } catch (err) {
    const message = `in-record is not JSON: ${err instanceof Error ? err.message : String(err)}`;
    return { ok: false, result: errorResult(requestId, 'invalid_request', message, { tryCount }) };
  }
  return validateRecord(contract, input, requestId, tryCount);
}

/** `parseRecord` for a value already parsed from JSON (an inline task's). */
export function validateRecord(
  contract: RequestContract,
  input: unknown,
  requestId: string,
  tryCount: number,
): Parsed {
  const parsed = contract.safeParse(input);
  if (parsed.ok) return { ok: true, envelope: parsed.value };
  const result = invalidRequestResult(input, parsed.error);
  result.meta.requestId ??= requestId;
  result.meta.tryCount = tryCount;
  return { ok: false, result };
}

/**
 * An inline record's request. One the router marked as checked (`InlineRecord.checked`) is its
 * contract's output already and is taken as it is, unless it is not even shaped like an envelope
 * (then it is validated, and answered as any invalid record is); an unmarked one is validated.
 */
export function inlineRequest(
  contract: RequestContract,
  inline: InlineRecord,
  requestId: string,
  tryCount: number,
): Parsed {
  if (inline.checked && looksLikeEnvelope(inline.value)) return { ok: true, envelope: inline.value };
  return validateRecord(contract, inline.value, requestId, tryCount);
}

function looksLikeEnvelope(value: unknown): value is RequestEnvelope {
  if (!isObject(value) || !isObject(value.request) || !isObject(value.meta)) return false;
  return typeof value.meta.requestId === 'string' && typeof value.request.method === 'string';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The queued task of a lease's payload; undefined when it is not one. */
export function decodeTask(payload: string): QueuedTask | undefined {
  try {
    return decodeQueuedTask(payload);
  } catch {
    return undefined;
  }
}
