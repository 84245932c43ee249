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

/** What a per-task (or per-request) piece of code writes lines with: a Logger, or a `lazyChild`. */
export type LineLogger = Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;

/**
 * A child of `parent` with `bindings`, made on the first line written at a level `parent` has on.
 * A pino child serializes (and redacts) its bindings when made; per task that cost more than the
 * lines, since most tasks write none. The lines are the child's, byte for byte. `with` adds
 * bindings, as `child` would (pino writes a child of a child's bindings in the same order as one
 * child's with both).
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): LazyChild {
  return new LazyChild(parent, bindings);
}

export class LazyChild implements LineLogger {
  #child: Logger | undefined;
  private readonly parent: Logger;
  private readonly bindings: Record<string, unknown>;

  constructor(parent: Logger, bindings: Record<string, unknown>) {
    this.parent = parent;
    this.bindings = bindings;
  }

  /** This child with more bindings (made lazily too). */
  with(more: Record<string, unknown>): LazyChild {
    return new LazyChild(this.parent, { ...this.bindings, ...more });
  }

  debug(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.#write('debug', obj, msg, args);
  }

  info(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.#write('info', obj, msg, args);
  }

  warn(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.#write('warn', obj, msg, args);
  }

  error(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.#write('error', obj, msg, args);
  }

  #write(
    level: 'debug' | 'info' | 'warn' | 'error',
    obj: unknown,
    msg: string | undefined,
    args: unknown[],
  ): void {
    if (!this.parent.isLevelEnabled(level)) return;
    this.#child ??= this.parent.child(this.bindings);
    const write = this.#child[level] as (...a: unknown[]) => void;
    if (msg === undefined) write.call(this.#child, obj);
    else write.call(this.#child, obj, msg, ...args);
  }
}
