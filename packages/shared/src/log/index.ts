import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * The one logger factory. JSON lines on stdout (pino); child loggers carry `role` and, per task,
 * `requestId`. Header values that may hold credentials are redacted wherever they appear.
 */
const REDACT = [
  '*.headers.authorization',
  '*.headers.Authorization',
  '*.headers.cookie',
  '*.headers["proxy-authorization"]',
  '*.headers["x-api-key"]',
  '*.secret',
  '*.secrets',
  '*.password',
  'password',
  'secret',
];

export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino({
    name: options.name ?? 'requester',
    level: options.level ?? 'info',
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
  });
}
