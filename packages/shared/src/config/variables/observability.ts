/** Logs, metrics, traces and the task journal. */

import { z } from 'zod';
import { goDuration } from '../values.ts';
import { variable } from '../variable.ts';

export const observabilityVariables = {
  logLevel: variable(
    'LOG_LEVEL',
    'info',
    z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']),
    'pino log level',
  ),
  events: variable(
    'EVENTS',
    'all',
    z.enum(['off', 'failures', 'all']),
    'task journal: all = every step of every request; failures = only the requests that left the first-attempt-success path (held, retried, outboxed, failed); off = none',
  ),
  metricsSampleInterval: variable(
    'METRICS_SAMPLE_INTERVAL',
    '10s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how often routers sample queue depths and the consumer lag of in, and relays the outbox backlog, into /metrics',
  ),
  otelEndpoint: variable(
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    undefined,
    z.string().url().optional(),
    'OTLP/HTTP endpoint for traces; unset = no export',
  ),
};
