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

/** Distinct kafkajs lines remembered for folding repeats (oldest forgotten first). */
const REMEMBERED_LINES = 1_000;

/**
 * Routes kafkajs logs into pino. In an outage kafkajs logs every failed connection attempt of
 * every client — dozens of identical lines a second — so a line already written within
 * `repeatWindowMs` is folded: the next one written after the window says how many it stands for
 * (`repeated`).
 */
export function kafkaLogCreator(log: Logger, repeatWindowMs = 5_000): LogCreator {
  const written = new Map<string, { at: number; folded: number }>();
  return () =>
    ({ namespace, level, log: entry }) => {
      const { message, timestamp: _ts, logger: _l, ...extra } = entry;
      const key = `${level}\0${namespace}\0${message}`;
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
      log[LEVELS[level] ?? 'info']({ namespace, ...extra, ...repeated }, String(message));
    };
}
