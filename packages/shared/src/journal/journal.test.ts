import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOfKey } from '../kafka/kafkajs/partitioner.ts';
import type { KafkaProducer } from '../kafka/types.ts';
import { registry } from '../metrics/index.ts';
import { createTestTopics, silentLogger, testKafka, uniqueName } from '../testing/index.ts';
import type { JournalEventInput } from './event.ts';
import { eventsOfClient, readJournal } from './reader.ts';
import { createJournal, type JournalMode } from './writer.ts';

/** The journal's writer and reader on the shared Kafka, each test on a topic of its own. */
describe('task journal (real Kafka)', () => {
  let producer: KafkaProducer;
  const fetcher = testKafka(uniqueName('journal')).fetcher({ cacheBytes: 0 });

  beforeAll(async () => {
    producer = testKafka().producer();
    await producer.connect();
  });
  afterAll(async () => {
    await producer?.disconnect();
    await fetcher.close();
  });

  async function topicWith(
    mode: JournalMode,
    events: JournalEventInput[],
    maxHeldRequests?: number,
  ): Promise<string> {
    const topic = uniqueName('events');
    await createTestTopics([topic], 4);
    const journal = createJournal({
      producer: async () => producer,
      topic,
      mode,
      logger: silentLogger,
      ...(maxHeldRequests === undefined ? {} : { maxHeldRequests }),
    });
    for (const event of events) journal.emit(event);
    await journal.close();
    return topic;
  }

  // Every hop names the request's client on its events (the client namespace).
  const happy = (requestId: string, t: number, client = 'a'): JournalEventInput[] => [
    { type: 'accepted', requestId, client, channel: 'http', at: t },
    { type: 'routed', requestId, client, to: 'redis', due: t + 1, at: t + 1 },
    { type: 'leased', requestId, client, executor: 'x', tryCount: 0, at: t + 2 },
    { type: 'attempt', requestId, client, n: 1, status: 200, durationMs: 3, at: t + 5 },
    { type: 'completed', requestId, client, status: 200, tryCount: 1, at: t + 6 },
  ];
  const retried = (requestId: string, t: number, client = 'a'): JournalEventInput[] => [
    { type: 'accepted', requestId, client, channel: 'http', at: t },
    { type: 'routed', requestId, client, to: 'redis', due: t + 1, at: t + 1 },
    { type: 'leased', requestId, client, executor: 'x', tryCount: 0, at: t + 2 },
    { type: 'attempt', requestId, client, n: 1, status: 503, durationMs: 3, at: t + 5 },
    { type: 'retry_scheduled', requestId, client, delayMs: 100, where: 'redis', at: t + 5 },
    { type: 'leased', requestId, client, executor: 'x', tryCount: 1, at: t + 106 },
    { type: 'attempt', requestId, client, n: 2, status: 200, durationMs: 3, at: t + 110 },
    { type: 'completed', requestId, client, status: 200, tryCount: 2, at: t + 111 },
  ];

  it('EVENTS=all: every event, keyed by requestId, read back in order from the one partition of its key', async () => {
    const t = Date.now();
    const topic = await topicWith('all', [
      ...happy('r-ok', t),
      ...retried('r-retry', t),
      ...happy('r-other', t),
    ]);
    const story = await readJournal(fetcher, topic, { requestId: 'r-retry' });
    expect(story.map((e) => e.type)).toEqual([
      'accepted',
      'routed',
      'leased',
      'attempt',
      'retry_scheduled',
      'leased',
      'attempt',
      'completed',
    ]);
    expect(story.every((e) => e.requestId === 'r-retry')).toBe(true);
    expect(await recordsIn(topic)).toBe(3); // one record per request and flush
  });

  it('the key → partition mapping is the producer’s: every event of a key is found in partitionOfKey', async () => {
    const t = Date.now();
    const ids = Array.from({ length: 20 }, (_, i) => `p-${i}`);
    const topic = await topicWith(
      'all',
      ids.flatMap((id) => happy(id, t)),
    );
    for (const id of ids) expect(await readJournal(fetcher, topic, { requestId: id })).toHaveLength(5);
    expect(new Set(ids.map((id) => partitionOfKey(id, 4))).size).toBeGreaterThan(1);
  });

  it('records that are not arrays of known events are skipped, not fatal', async () => {
    const topic = await topicWith('all', happy('r-mixed', Date.now()));
    await producer.send(topic, [
      { key: 'r-mixed', value: '{"type":"accepted"}' },
      { key: 'r-mixed', value: 'not json' },
      {
        key: 'r-mixed',
        value: JSON.stringify([{ type: 'from_the_future', requestId: 'r-mixed', at: Date.now() }]),
      },
    ]);
    expect(await readJournal(fetcher, topic, { requestId: 'r-mixed' })).toHaveLength(5);
  });

  it('--since: events written before it are not read', async () => {
    const topic = await topicWith('all', happy('r-old', Date.now() - 7_200_000));
    expect(await readJournal(fetcher, topic, { requestId: 'r-old' })).toEqual([]);
    expect(
      await readJournal(fetcher, topic, { requestId: 'r-old', sinceMs: Date.now() - 3 * 3_600_000 }),
    ).toHaveLength(5);
  });

  it('EVENTS=failures: a first-attempt success writes nothing; a retried request writes its whole story', async () => {
    const t = Date.now();
    const topic = await topicWith('failures', [...happy('f-ok', t), ...retried('f-retry', t)]);
    expect(await readJournal(fetcher, topic, { requestId: 'f-retry' })).toHaveLength(8);
    expect(await readJournal(fetcher, topic, { requestId: 'f-ok' })).toEqual([]);
  });

  it("two clients' requests of one requestId are two stories: EVENTS=failures holds each apart, readers pick one", async () => {
    const t = Date.now();
    // Interleaved: A's first-attempt success must not flush or drop B's held steps, nor the reverse.
    const a = happy('shared-id', t, 'probe-a');
    const b = retried('shared-id', t, 'probe-b');
    const topic = await topicWith('failures', [
      ...a.slice(0, 3),
      ...b.slice(0, 3),
      ...a.slice(3),
      ...b.slice(3),
    ]);
    const events = await readJournal(fetcher, topic, { requestId: 'shared-id' });
    expect(eventsOfClient(events, 'probe-a')).toEqual([]);
    expect(eventsOfClient(events, 'probe-b')).toHaveLength(8);
    expect(eventsOfClient(events, undefined)).toEqual([]);

    const all = await topicWith('all', [...happy('one-id', t, 'probe-a'), ...happy('one-id', t)]);
    const both = await readJournal(fetcher, all, { requestId: 'one-id' });
    expect(eventsOfClient(both, 'probe-a').map((e) => e.client)).toEqual(Array(5).fill('probe-a'));
    expect(eventsOfClient(both, 'a')).toHaveLength(5);
  });

  it('EVENTS=failures: requests that left the happy path count against maxHeldRequests too', async () => {
    const t = Date.now();
    // A router alone sees `routed` to the outbox and never the request's `completed`: three such
    // requests with room for two, then a happy step of each, newest first. The oldest was
    // forgotten, so its step is held (and dropped at close) like any first-attempt step; the
    // others are written at once.
    const ids = ['held-0', 'held-1', 'held-2'];
    const topic = await topicWith(
      'failures',
      [
        ...ids.map(
          (requestId): JournalEventInput => ({
            type: 'routed',
            requestId,
            client: 'a',
            to: 'outbox',
            due: t + 60_000,
            at: t,
          }),
        ),
        ...ids.toReversed().map(
          (requestId): JournalEventInput => ({
            type: 'leased',
            requestId,
            client: 'a',
            executor: 'x',
            tryCount: 0,
            at: t + 1,
          }),
        ),
      ],
      2,
    );
    const types = async (requestId: string) =>
      (await readJournal(fetcher, topic, { requestId })).map((e) => e.type);
    expect(await types('held-0')).toEqual(['routed']);
    expect(await types('held-1')).toEqual(['routed', 'leased']);
    expect(await types('held-2')).toEqual(['routed', 'leased']);
  });

  it('EVENTS=off: nothing is produced', async () => {
    const t = Date.now();
    const topic = await topicWith('off', [...happy('o-ok', t), ...retried('o-retry', t)]);
    expect(await recordsIn(topic)).toBe(0);
  });

  it('a full buffer drops new events and counts them instead of blocking the caller', async () => {
    const topic = uniqueName('events');
    await createTestTopics([topic], 1);
    let release: () => void = () => {};
    const stalled = new Promise<void>((resolve) => {
      release = resolve;
    });
    // A producer that is not there yet: the first flush waits, the buffer fills.
    const journal = createJournal({
      producer: async () => {
        await stalled;
        return producer;
      },
      topic,
      mode: 'all',
      logger: silentLogger,
      maxBuffered: 10,
      batchSize: 5,
    });
    const before = await droppedCount();
    for (let i = 0; i < 30; i++) journal.emit({ type: 'relayed', requestId: `d-${i}` });
    expect(await droppedCount()).toBe(before + 20);
    release();
    await journal.close();
    expect(await recordsIn(topic)).toBe(10);
  });
});

async function recordsIn(topic: string): Promise<number> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    const offsets = await admin.topicOffsets(topic);
    return offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}

async function droppedCount(): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find(
    (m) => m.name === 'requester_journal_events_dropped_total',
  );
  return (metric?.values ?? []).reduce((sum, v) => sum + Number(v.value), 0);
}
