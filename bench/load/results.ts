/** Results on `out`, each handed to the tracker of its round. */
import { randomBytes } from 'node:crypto';
import type * as hdr from 'hdr-histogram-js';
import type { KafkaConsumer } from '../../packages/shared/src/index.ts';
import { kafka } from './settings.ts';

export interface Tracker {
  prefix: string;
  sentAt: Map<string, number>;
  histogram: hdr.Histogram;
  done: number;
  lastAt: number;
  onDone?: () => void;
}

/** Reads `out` from its start; hands each result of the current round to its tracker. */
export class ResultReader {
  private readonly consumer: KafkaConsumer;
  private readonly seen = new Set<string>();
  private readonly topic: string;
  current: Tracker | undefined;

  constructor(topic: string) {
    this.topic = topic;
    this.consumer = kafka.consumer({
      groupId: `${topic}-reader-${randomBytes(3).toString('hex')}`,
      maxWaitMs: 100,
    });
  }

  async start(): Promise<void> {
    await this.consumer.start({
      topics: [this.topic],
      fromBeginning: true,
      commit: 'never',
      partitionsConsumedConcurrently: 3,
      onBatch: async ({ records }) => {
        const now = performance.now();
        for (const record of records) this.take(record.key?.toString() ?? '', now);
      },
    });
  }

  private take(id: string, now: number): void {
    const tracker = this.current;
    if (!tracker || !id.startsWith(tracker.prefix) || this.seen.has(id)) return;
    const sent = tracker.sentAt.get(id);
    if (sent === undefined) return;
    this.seen.add(id);
    tracker.histogram.recordValue(Math.max(1, Math.round((now - sent) * 1000)));
    tracker.done++;
    tracker.lastAt = now;
    if (tracker.done === tracker.sentAt.size) tracker.onDone?.();
  }

  stop(): Promise<void> {
    return this.consumer.stop();
  }
}
