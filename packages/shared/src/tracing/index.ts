import {
  type Context,
  context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  type SpanOptions,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { headerText, type RecordHeaders } from '../kafka/types.ts';
import { RandomPool } from './random.ts';

export { type Context, type Span, SpanKind, type SpanOptions, SpanStatusCode } from '@opentelemetry/api';

/**
 * OpenTelemetry traces. Spans are exported over OTLP/HTTP only when an endpoint is configured;
 * without one the API is a no-op and costs nothing. Trace context travels hop to hop as a W3C
 * `traceparent`: the Kafka record header of that name (else `meta.traceparent`), the queued task's
 * `x` field, and `meta.traceparent` of an outbox row. With tracing off the spans are non-recording
 * and hand on their parent's context, so the trace id still reaches the target and the result.
 */
let provider: NodeTracerProvider | undefined;

/**
 * Registers the exporting provider when `endpoint` is set. The SDK is loaded only then: it is the
 * heaviest of our imports, and every CLI command and every process without an endpoint would pay
 * for it at start.
 */
export async function initTracing(serviceName: string, endpoint: string | undefined): Promise<void> {
  if (!endpoint || provider) return;
  const [
    { OTLPTraceExporter },
    { resourceFromAttributes },
    { BatchSpanProcessor },
    { NodeTracerProvider },
    semconv,
  ] = await Promise.all([
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/semantic-conventions'),
  ]);
  if (provider) return;
  const { ATTR_SERVICE_NAME } = semconv;
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, '')}/v1/traces` })),
    ],
  });
  provider.register();
}

export async function shutdownTracing(): Promise<void> {
  await provider?.shutdown();
  provider = undefined;
}

export function tracer(): Tracer {
  return trace.getTracer('requester');
}

const ids = new RandomPool();

/** A fresh W3C traceparent, for requests that arrive without one. */
export function newTraceparent(): string {
  return `00-${ids.nonZeroHex(16)}-${ids.nonZeroHex(8)}-01`;
}

/** true once spans are exported (OTEL_EXPORTER_OTLP_ENDPOINT set). */
export function tracingEnabled(): boolean {
  return provider !== undefined;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/;

/**
 * The context whose parent is `traceparent` (a remote span), or `ROOT_CONTEXT` for a missing or
 * invalid one. Parsed here rather than through the global propagator, which only exists while a
 * provider is registered: the trace must carry on with tracing off too.
 */
export function contextFrom(traceparent: string | undefined): Context {
  const match = traceparent ? TRACEPARENT.exec(traceparent.trim().toLowerCase()) : null;
  if (!match || match[1] === 'ff') return ROOT_CONTEXT;
  const spanContext = {
    traceId: match[2] as string,
    spanId: match[3] as string,
    traceFlags: Number.parseInt(match[4] as string, 16) & 1,
    isRemote: true,
  };
  return isSpanContextValid(spanContext) ? trace.setSpanContext(ROOT_CONTEXT, spanContext) : ROOT_CONTEXT;
}

/** The W3C traceparent of `span` (or of the span in a context), undefined when it has no valid context. */
export function traceparentOf(from: Span | Context | undefined): string | undefined {
  const span = from && 'spanContext' in from ? from : from ? trace.getSpan(from) : undefined;
  const ctx = span?.spanContext();
  if (!ctx || !isSpanContextValid(ctx)) return undefined;
  return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * The traceparent of a span under `parent` while tracing is off: such a span is a no-op one with its
 * parent's context (when `parent` parses), so this is `parent` normalised, or `parent` as it is.
 * For the hops that skip their spans then (they cost every task, and nobody records them).
 */
export function untracedTraceparent(parent: string | undefined): string | undefined {
  return traceparentOf(contextFrom(parent)) ?? parent;
}

/** The trace id of a traceparent, undefined when it is not a valid one. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  return trace.getSpanContext(contextFrom(traceparent))?.traceId;
}

/** The first `traceparent` that is valid, in order of precedence. */
export function firstTraceparent(...candidates: Array<string | undefined>): string | undefined {
  return candidates.find((candidate) => traceIdOf(candidate) !== undefined);
}

/** What a span may be started under: a traceparent, a span, a context, or (undefined) the active span. */
export type SpanParent = string | Span | Context | undefined;

function contextOf(parent: SpanParent): Context {
  if (parent === undefined) return context.active();
  if (typeof parent === 'string') return contextFrom(parent);
  return 'spanContext' in parent ? trace.setSpan(ROOT_CONTEXT, parent) : parent;
}

/** A span under `parent` that the caller ends. */
export function startSpan(name: string, parent: SpanParent, options: SpanOptions): Span {
  const ctx = contextOf(parent);
  return tracer().startSpan(name, options, ctx);
}

/**
 * Runs `fn` in a span under `parent` (a traceparent or a context), made the active span; the span
 * records an exception `fn` throws and ends when `fn` settles.
 */
export async function inSpan<T>(
  name: string,
  parent: SpanParent,
  options: SpanOptions,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const span = startSpan(name, parent, options);
  try {
    return await context.with(trace.setSpan(context.active(), span), () => fn(span));
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

/** The `traceparent` header of a Kafka record (the first, when repeated), as text. */
export function traceparentHeader(headers: RecordHeaders | undefined): string | undefined {
  return headerText(headers, 'traceparent');
}

/** Attributes of a Kafka span (messaging semantic conventions). */
export function kafkaAttributes(
  operation: 'send' | 'receive' | 'process',
  topic: string,
): Record<string, string> {
  return {
    'messaging.system': 'kafka',
    'messaging.operation.type': operation,
    'messaging.destination.name': topic,
  };
}
