import { clientScoped } from '../contract/namespace.ts';
import type { KafkaProducer, OutgoingRecord } from '../kafka/types.ts';
import type { Logger } from '../log/index.ts';
import { counter } from '../metrics/index.ts';
import { isFinalStep, isHappyStep, type JournalEvent, type JournalEventInput } from './event.ts';

/**
 * The journal's writer: hops call `emit` (synchronous, never awaited, never throws) and the events
 * go to KAFKA_TOPIC_EVENTS in batches, off the request path — a flush when `batchSize` events are
 * buffered or `flushMs` after the first one, one produce in flight at a time. The buffer is
 * bounded: when Kafka is slow or away, new events are dropped and counted
 * (`journal_events_dropped_total`) rather than held in memory or making a caller wait.
 *
 * EVENTS (`JournalMode`):
 * - `all`: every event.
 * - `failures`: only the stories that left the happy path (isHappyStep). Happy steps are held
 *   per request (a client's requestId) in this process; the first other step of that request writes them before it,
 *   a final step (completed, dead-lettered) that is itself happy discards them. So a request that
 *   succeeded at its first attempt writes nothing; one that was held, retried or failed writes
 *   what this process saw of it (e.g. the executor's leased → attempt → retry_scheduled; the
 *   ingress's `accepted` is written only when ingress and executor share the process).
 * - `off`: nothing (`emit` is a no-op).
 */
export type JournalMode = 'off' | 'failures' | 'all';

export interface Journal {
  emit(event: JournalEventInput): void;
  /** Writes what is buffered (waits for it); later emits are dropped. */
  close(): Promise<void>;
}

export interface JournalWriterOptions {
  producer: () => Promise<KafkaProducer>;
  topic: string;
  mode: JournalMode;
  logger: Logger;
  /** Events buffered at most; beyond, new events are dropped (counted). */
  maxBuffered?: number;
  /** Flush when this many are buffered... */
  batchSize?: number;
  /** ...or this long after the first one. */
  flushMs?: number;
  produceTimeoutMs?: number;
  /** Requests whose happy steps are held (EVENTS=failures); the oldest are forgotten first. */
  maxHeldRequests?: number;
  now?: () => number;
}

const dropped = counter(
  'journal_events_dropped_total',
  'task journal events not written: buffer full, Kafka unavailable, or the journal closed',
  ['reason'],
);

const NO_JOURNAL: Journal = { emit: () => {}, close: async () => {} };

export function createJournal(options: JournalWriterOptions): Journal {
  return options.mode === 'off' ? NO_JOURNAL : new JournalWriter(options);
}

class JournalWriter implements Journal {
  private readonly options: Required<Omit<JournalWriterOptions, 'logger'>> & { logger: Logger };
  /**
   * Events waiting for the next flush, by request: its requestId in its client's namespace
   * (`storyOf`; one record per request and flush). So are the held steps of EVENTS=failures.
   */
  private buffer = new Map<string, JournalEvent[]>();
  private buffered = 0;
  private readonly held = new Map<string, JournalEvent[]>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;
  private lastWarnAt = 0;

  constructor(options: JournalWriterOptions) {
    this.options = {
      maxBuffered: 20_000,
      batchSize: 1_000,
      flushMs: 50,
      produceTimeoutMs: 10_000,
      maxHeldRequests: 10_000,
      now: Date.now,
      ...options,
    };
    // Exported at 0 from the start: increase() and the dropped-events alert see the first drop.
    for (const reason of ['closed', 'buffer_full', 'unavailable']) dropped.inc({ reason }, 0);
  }

  emit(input: JournalEventInput): void {
    if (this.closed) {
      dropped.inc({ reason: 'closed' });
      return;
    }
    const event = { ...input, at: input.at ?? this.options.now() } as JournalEvent;
    if (this.options.mode === 'failures') this.filterFailures(event);
    else this.push(event);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.held.clear();
    while (this.flushing || this.buffered > 0) {
      await this.flushing;
      clearTimeout(this.timer);
      if (this.buffered > 0) await this.flushNow();
    }
  }

  private filterFailures(event: JournalEvent): void {
    const story = storyOf(event);
    const earlier = this.held.get(story);
    if (isHappyStep(event)) {
      if (isFinalStep(event)) this.held.delete(story);
      else this.hold(story, earlier, event);
      return;
    }
    if (earlier) for (const step of earlier) this.push(step);
    if (isFinalStep(event)) this.held.delete(story);
    else this.remember(story, []);
    this.push(event);
  }

  /** A request that left the happy path keeps an empty entry: its next steps are written at once. */
  private hold(story: string, earlier: JournalEvent[] | undefined, event: JournalEvent): void {
    if (earlier?.length === 0) {
      this.push(event);
      return;
    }
    if (earlier) earlier.push(event);
    else this.remember(story, [event]);
  }

  /**
   * Every entry is bounded alike, the empty ones too: a process sees only its roles' steps, so a
   * router that journals `routed` to the outbox never sees that request's `completed`, and its
   * entries would otherwise pile up for as long as it runs.
   */
  private remember(story: string, steps: JournalEvent[]): void {
    this.held.delete(story);
    this.held.set(story, steps);
    if (this.held.size > this.options.maxHeldRequests)
      this.held.delete(this.held.keys().next().value as string);
  }

  private push(event: JournalEvent): void {
    if (this.buffered >= this.options.maxBuffered) {
      dropped.inc({ reason: 'buffer_full' });
      return;
    }
    const story = storyOf(event);
    const steps = this.buffer.get(story);
    if (steps) steps.push(event);
    else this.buffer.set(story, [event]);
    this.buffered++;
    if (this.buffered >= this.options.batchSize) this.flushSoon(0);
    else this.flushSoon(this.options.flushMs);
  }

  private flushSoon(ms: number): void {
    if (this.flushing) return; // the running flush takes what accumulated when it is done
    if (this.timer && ms > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flushNow();
    }, ms);
    this.timer.unref();
  }

  private flushNow(): Promise<void> {
    this.flushing ??= (async () => {
      const batch = this.buffer;
      const events = this.buffered;
      this.buffer = new Map();
      this.buffered = 0;
      try {
        const producer = await this.options.producer();
        await producer.send(this.options.topic, records(batch), this.options.produceTimeoutMs);
      } catch (err) {
        dropped.inc({ reason: 'unavailable' }, events);
        this.warnAtMostEvery10s(err, events);
      }
    })().finally(() => {
      this.flushing = undefined;
      // What came meanwhile waits for its own flushMs (or a full batch): right away would make one
      // produce per round trip, and the per-request cost is what the journal must keep low.
      if (this.buffered >= this.options.batchSize) this.flushSoon(0);
      else if (this.buffered > 0) this.flushSoon(this.options.flushMs);
    });
    return this.flushing;
  }

  private warnAtMostEvery10s(err: unknown, events: number): void {
    const now = Date.now();
    if (now - this.lastWarnAt < 10_000) return;
    this.lastWarnAt = now;
    this.options.logger.warn({ err, events }, 'task journal: events could not be written and were dropped');
  }
}

/**
 * One record per request and flush: its value is the JSON array of the request's events, in
 * order; its timestamp the first one's time. Kafka's cost is mostly per record (encoding, the
 * partitioner's hash), and a fast task's leased, attempt and completed usually share a flush.
 */
function records(batch: Map<string, JournalEvent[]>): OutgoingRecord[] {
  return [...batch.values()].map((events) => ({
    key: events[0]?.requestId ?? null,
    value: JSON.stringify(events),
    timestamp: String(events[0]?.at ?? Date.now()),
  }));
}

/**
 * Which request an event tells of: its requestId in its client's namespace (two clients' requests
 * may share a requestId). The record's Kafka key stays the bare requestId, which readers look up.
 */
function storyOf(event: JournalEvent): string {
  return clientScoped(event.client, event.requestId);
}
