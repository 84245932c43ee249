import type { Logger } from '../log/index.ts';
import { counter } from '../metrics/index.ts';
import type { KafkaConsumer } from './types.ts';

const crashes = counter(
  'kafka_consumer_crashes_total',
  'consumer crashes (the client restarts the consumer after most of them), by consumer group',
  ['group'],
);

/** Crashes within CRASH_WINDOW_MS that make a consumer not ready: one crash is an outage blip, several a loop. */
export const CRASH_LIMIT = 3;
export const CRASH_WINDOW_MS = 5 * 60_000;

export interface ConsumerHealthOptions {
  logger: Logger;
  /** Crashes within `windowMs` that make the consumers not ready (default CRASH_LIMIT). */
  crashLimit?: number;
  windowMs?: number;
  now?: () => number;
}

interface Watched {
  group: string;
  crashedAt: Array<{ at: number; unreachable: boolean }>;
  /** The client gave up on it (a crash it does not restart after): it consumes nothing any more. */
  stopped: boolean;
  /** It crashed since it last joined its group: its next join is logged (the outage is over for it). */
  crashedSinceJoin: boolean;
}

/**
 * The crash record of a process's consumers, for /readyz. The client restarts a consumer after a crash
 * on its own, so a consumer that fails on every batch never dies: it loops, restarting every few
 * seconds, and the partitions it holds stop moving. Counted in `kafka_consumer_crashes_total{group}`;
 * a consumer that crashed `crashLimit` times within `windowMs`, or that the client stopped restarting,
 * makes the process not ready.
 *
 * A crash because the broker could not be reached is forgotten once the consumer joins its group
 * again: a partition from Kafka of a few seconds crashes every restart attempt, and counting those
 * for the whole window kept a process not ready for minutes after Kafka was back (while the
 * outage lasts, /readyz's Kafka probe says not ready anyway). A batch that fails is not forgotten
 * on a join: that loop joins every time.
 */
export class ConsumerHealth {
  private readonly watched: Watched[] = [];
  private readonly options: Required<Omit<ConsumerHealthOptions, 'logger'>> & { logger: Logger };

  constructor(options: ConsumerHealthOptions) {
    this.options = {
      crashLimit: CRASH_LIMIT,
      windowMs: CRASH_WINDOW_MS,
      now: Date.now,
      ...options,
    };
  }

  /** Follows the crashes of `consumer` (call before `start`); the returned function stops following. */
  watch(consumer: KafkaConsumer, group: string = consumer.groupId): () => void {
    const watched: Watched = { group, crashedAt: [], stopped: false, crashedSinceJoin: false };
    this.watched.push(watched);
    // Exported at 0 from the start: increase() and the crash-loop alert see the first crash.
    crashes.inc({ group }, 0);
    const offJoined = consumer.onAssigned(() => {
      watched.crashedAt = watched.crashedAt.filter((crash) => !crash.unreachable);
      if (!watched.crashedSinceJoin) return;
      watched.crashedSinceJoin = false;
      this.options.logger.info({ group }, 'Kafka consumer joined its group again after a crash');
    });
    const off = consumer.onCrash((payload) => {
      crashes.inc({ group });
      const now = this.options.now();
      watched.crashedAt = [
        ...watched.crashedAt.filter((crash) => now - crash.at < this.options.windowMs),
        { at: now, unreachable: payload.unreachable },
      ];
      if (!payload.restart) watched.stopped = true;
      watched.crashedSinceJoin = true;
      this.options.logger.error(
        { err: payload.error, group, restart: payload.restart, recentCrashes: watched.crashedAt.length },
        payload.restart
          ? 'Kafka consumer crashed; the client restarts it'
          : 'Kafka consumer crashed for good',
      );
    });
    return () => {
      off();
      offJoined();
      const at = this.watched.indexOf(watched);
      if (at >= 0) this.watched.splice(at, 1);
    };
  }

  /** Whether any consumer is watched (only then does /readyz report on them). */
  get watching(): boolean {
    return this.watched.length > 0;
  }

  /** false while a watched consumer crash-loops (see the class comment) or was given up. */
  get ready(): boolean {
    const now = this.options.now();
    return this.watched.every(
      (w) =>
        !w.stopped &&
        w.crashedAt.filter((crash) => now - crash.at < this.options.windowMs).length <
          this.options.crashLimit,
    );
  }
}
