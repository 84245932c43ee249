import pino, { type DestinationStream, type Logger } from 'pino';

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

/**
 * `destination: 2` writes to stderr (admin commands keep stdout for their output); a stream takes
 * the lines instead (tests that read what the service's own settings write).
 */
export function createLogger(
  options: { level?: string; name?: string; destination?: 1 | 2 | DestinationStream } = {},
): Logger {
  const settings = {
    name: options.name ?? 'requester',
    level: options.level ?? 'info',
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT, censor: '[redacted]' },
    formatters: { level: (label: string) => ({ level: label }) },
  };
  const { destination } = options;
  if (destination === undefined || destination === 1) return pino(settings);
  return pino(settings, destination === 2 ? pino.destination(2) : destination);
}
