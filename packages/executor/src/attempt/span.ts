import { type Span, SpanKind, type SpanOptions, SpanStatusCode } from '@requester/shared/tracing';
import type { CallOutcome, HttpCall } from '../http/index.ts';

/**
 * The CLIENT span of a call to the target (HTTP semantic conventions). The URL loses its userinfo
 * and its query values: a collector is no place for the credentials they may hold.
 */
export function clientSpanOptions(call: HttpCall): SpanOptions {
  const url = new URL(call.uri);
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  url.username = '';
  url.password = '';
  for (const key of new Set(url.searchParams.keys())) url.searchParams.set(key, 'REDACTED');
  return {
    kind: SpanKind.CLIENT,
    attributes: {
      'http.request.method': call.method,
      'url.full': url.toString(),
      'server.address': url.hostname,
      'server.port': port,
    },
  };
}

/** A response of 4xx/5xx, or no response, is an error of the CLIENT span. */
export function endClientSpan(span: Span, outcome: CallOutcome): void {
  if (outcome.kind === 'response') {
    span.setAttribute('http.response.status_code', outcome.status);
    if (outcome.status >= 400) {
      span.setAttribute('error.type', String(outcome.status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    return;
  }
  span.setAttribute('error.type', outcome.error.code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error.message });
}

/**
 * The call with the W3C `traceparent` of this attempt, so the target continues the task's trace:
 * its span's context when tracing is on, else the request's `meta.traceparent` (normalised when it
 * parses). A `traceparent` header the caller set is kept.
 */
export function withTraceparent(call: HttpCall, traceparent: string | undefined): HttpCall {
  if (!traceparent) return call;
  for (const name in call.headers) if (name.toLowerCase() === 'traceparent') return call;
  return { ...call, headers: { ...call.headers, traceparent } };
}

/** The traceparent of `span`, or `fallback` when it has no trace (a no-op span without a parent). */
export function spanTraceparent(span: Span, fallback: string | undefined): string | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return /^0+$/.test(traceId)
    ? fallback
    : `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, '0')}`;
}
