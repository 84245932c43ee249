import { randomBytes } from 'node:crypto';
import { context, propagation, type Span, SpanKind, type Tracer, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';

export { type Span, SpanKind } from '@opentelemetry/api';

/**
 * OpenTelemetry traces. Spans are exported over OTLP/HTTP only when an endpoint is configured;
 * without one the API is a no-op and costs nothing. Trace context travels in `meta.traceparent`
 * (W3C), so a task's spans link across ingress → router → executor even through Kafka.
 */
let provider: NodeTracerProvider | undefined;

export function initTracing(serviceName: string, endpoint: string | undefined): void {
  if (!endpoint || provider) return;
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

/** A fresh W3C traceparent, for requests that arrive without one. */
export function newTraceparent(): string {
  return `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
}

/** Runs `fn` in a span that continues the trace of `traceparent` (when valid). */
export async function inSpan<T>(
  name: string,
  traceparent: string | undefined,
  attributes: Record<string, string | number | boolean>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = traceparent ? propagation.extract(context.active(), { traceparent }) : context.active();
  return tracer().startActiveSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      throw err;
    } finally {
      span.end();
    }
  });
}
