import type { RequestEnvelope, ResultEnvelope } from '@requester/shared/contract';
import type { FetchedRecord } from '@requester/shared/kafka';
import type { QueuedTask } from '@requester/shared/task';
import {
  firstTraceparent,
  inSpan,
  startSpan,
  traceIdOf,
  traceparentHeader,
  traceparentOf,
  tracingEnabled,
  untracedTraceparent,
} from '@requester/shared/tracing';
import type { Job, Settlement } from './settlement.ts';

/**
 * Runs the attempt in its span, after recording the task's wait in the queue. The parent is the
 * span that queued the task (router, or the previous attempt), else the record's `traceparent`
 * header, else its `meta.traceparent`. The envelope handed on carries the attempt's span in
 * `meta.traceparent` (the CLIENT span and an outbox row continue it); a result carries the trace id.
 */
export function traced(
  job: Job,
  record: FetchedRecord,
  envelope: RequestEnvelope,
  run: (traced: RequestEnvelope) => Promise<Settlement>,
): Promise<Settlement> {
  const parent = firstTraceparent(
    job.task.traceparent,
    traceparentHeader(record.headers),
    envelope.meta.traceparent,
  );
  if (!tracingEnabled()) {
    // The spans below would be no-op ones, each task paying for their dates, attributes and contexts.
    return carryTraceparent(envelope, untracedTraceparent(parent), run);
  }
  const { requestId } = envelope.meta;
  const attributes = { 'requester.request_id': requestId, 'requester.try_count': job.task.tryCount };
  startSpan('queue wait', parent, {
    // Dates, not numbers: a number before this process started would be read as performance time.
    startTime: new Date(Math.min(job.task.requeuedAt ?? job.lease.publishedAt, job.leasedAt)),
    attributes: { ...attributes, 'requester.deliveries': job.lease.deliveries },
  }).end(new Date(job.leasedAt));
  return inSpan('execute', parent, { attributes }, (span) =>
    carryTraceparent(envelope, traceparentOf(span) ?? parent, run),
  );
}

/** Runs the attempt with `traceparent` in its envelope, and hands it on with a result to deliver. */
function carryTraceparent(
  envelope: RequestEnvelope,
  traceparent: string | undefined,
  run: (traced: RequestEnvelope) => Promise<Settlement>,
): Promise<Settlement> {
  // None to carry (tracing off, none sent): the attempt as it is, no async frame of its own.
  return traceparent ? carried(envelope, traceparent, run) : run(envelope);
}

async function carried(
  envelope: RequestEnvelope,
  traceparent: string,
  run: (traced: RequestEnvelope) => Promise<Settlement>,
): Promise<Settlement> {
  const traced = { ...envelope, meta: { ...envelope.meta, traceparent } };
  const settlement = await run(traced);
  // Outcomes.settlementOf put the trace id in the result already (the dead letter copies it from there).
  return settlement.kind === 'deliver' ? { ...settlement, traceparent } : settlement;
}

/** The result with the trace id of `traceparent` (unchanged without one, or when it has it). */
export function withTraceId(result: ResultEnvelope, traceparent: string | undefined): ResultEnvelope {
  const traceId = traceIdOf(traceparent);
  if (!traceId || result.meta.traceId === traceId) return result;
  return { ...result, meta: { ...result.meta, traceId } };
}

/** What a task put back carries for its next queue wait and attempt (nothing while tracing is off). */
export function requeueTrace(envelope: RequestEnvelope): Pick<QueuedTask, 'traceparent' | 'requeuedAt'> {
  const { traceparent } = envelope.meta;
  return tracingEnabled() && traceparent ? { traceparent, requeuedAt: Date.now() } : {};
}
