import { createRequire } from 'node:module';
import { type logCreator as LogCreator, logLevel, type SASLOptions } from 'kafkajs';
import type { Logger } from '../../log/index.ts';
import type { KafkaSecurity } from '../security.ts';

export function brokerList(brokers: string): string[] {
  return brokers.split(',').map((b) => b.trim());
}

/** Requester's security settings as kafkajs's client options. */
export function kafkajsSecurity(security: KafkaSecurity = {}): {
  ssl?: boolean | { ca: string[] };
  sasl?: SASLOptions;
} {
  return {
    ...(security.ssl === undefined ? {} : { ssl: security.ssl }),
    ...(security.sasl ? { sasl: security.sasl as SASLOptions } : {}),
  };
}

const LEVELS: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/**
 * The messages of the protocol errors Kafka marks retriable (kafkajs's own table): "This server is
 * not the leader for that topic-partition" while a new topic elects its leaders, a coordinator
 * that is loading. kafkajs logs each failed response at `error` and then retries it; what an
 * operator must act on is the error that remains once the retries run out, which the caller logs.
 */
const RETRIABLE_PROTOCOL_MESSAGES: ReadonlySet<string> = new Set(
  (
    createRequire(import.meta.url)('kafkajs/src/protocol/error') as {
      errorCodes: Array<{ message: string; retriable: boolean }>;
    }
  ).errorCodes
    .filter((e) => e.retriable)
    .map((e) => e.message),
);

/**
 * Errors of a response that the caller handles in full: CreateTopics answers "Topic creation
 * errors" when another process created a topic first, which ensureTopics expects (it lists the
 * topics again); written at `error`, it read like the cause of any failure that followed a start.
 */
const HANDLED_RESPONSE_ERRORS: ReadonlySet<string> = new Set(['Topic creation errors']);

/** The level a kafkajs line is written at: a retriable or handled error in a response is `debug`. */
function levelOf(level: number, error: unknown): 'error' | 'warn' | 'info' | 'debug' {
  if (
    typeof error === 'string' &&
    (RETRIABLE_PROTOCOL_MESSAGES.has(error) || HANDLED_RESPONSE_ERRORS.has(error))
  )
    return 'debug';
  return LEVELS[level] ?? 'info';
}

/** Distinct kafkajs lines remembered for folding repeats (oldest forgotten first). */
const REMEMBERED_LINES = 1_000;

/**
 * Routes kafkajs logs into pino. In an outage kafkajs logs every failed connection attempt of
 * every client — dozens of identical lines a second — so a line already written within
 * `repeatWindowMs` is folded: the next one written after the window says how many it stands for
 * (`repeated`). Retriable protocol errors, which kafkajs retries itself, are written at `debug`.
 */
export function kafkaLogCreator(log: Logger, repeatWindowMs = 5_000): LogCreator {
  const written = new Map<string, { at: number; folded: number }>();
  return () =>
    ({ namespace, level, log: entry }) => {
      const { message, timestamp: _ts, logger: _l, ...extra } = entry;
      const key = `${level}\0${namespace}\0${message}\0${String(extra.error ?? '')}`;
      const now = Date.now();
      const last = written.get(key);
      if (last && now - last.at < repeatWindowMs) {
        last.folded++;
        return;
      }
      written.delete(key);
      written.set(key, { at: now, folded: 0 });
      if (written.size > REMEMBERED_LINES) written.delete(written.keys().next().value as string);
      const repeated = last?.folded ? { repeated: last.folded } : {};
      log[levelOf(level, extra.error)]({ namespace, ...extra, ...repeated }, String(message));
    };
}
