import type { KafkaRecord } from '@requester/shared/kafka';
import {
  firstTraceparent,
  kafkaAttributes,
  type Span,
  SpanKind,
  startSpan,
  traceparentHeader,
  traceparentOf,
  tracingEnabled,
} from '@requester/shared/tracing';
import type { TraceRoute } from './route.ts';

/**
 * A CONSUMER span per record routed (not one per batch with links): each record is its own
 * trace, and the queue wait and attempt hang under this span, so the trace stays one tree. Its
 * parent is the record's `traceparent` header (a direct producer's, or the relay's), else
 * `meta.traceparent` (the ingress's). The spans started are pushed to `spans`, for the caller to end.
 */
export function traceRoute(record: KafkaRecord, spans: Span[]): TraceRoute {
  return (envelope) => {
    if (!tracingEnabled()) return undefined;
    const parent = firstTraceparent(traceparentHeader(record.headers), envelope.meta.traceparent);
    const span = startSpan(`process ${record.topic}`, parent, {
      kind: SpanKind.CONSUMER,
      attributes: {
        ...kafkaAttributes('process', record.topic),
        'messaging.destination.partition.id': String(record.partition),
        'messaging.kafka.offset': Number(record.offset),
        'requester.request_id': envelope.meta.requestId,
      },
    });
    spans.push(span);
    return traceparentOf(span);
  };
}
