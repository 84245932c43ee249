import { afterAll, describe, expect, it } from 'vitest';
import { registry } from '../metrics/index.ts';
import {
  capturingLogger,
  createTestTopics,
  eventually,
  routeConnections,
  silentLogger,
  startFaultProxy,
  TEST_KAFKA_BROKERS,
  testKafka,
  uniqueName,
} from '../testing/index.ts';
import { ConsumerHealth } from './health.ts';

async function crashCount(group: string): Promise<number> {
  const metric = await registry.getSingleMetric('requester_kafka_consumer_crashes_total')?.get();
  return metric?.values.find((v) => v.labels.group === group)?.value ?? 0;
}

describe('ConsumerHealth over a real consumer that fails on every batch', () => {
  const topic = uniqueName('health');
  const stops: Array<() => Promise<void>> = [];
  afterAll(() => Promise.all(stops.map((stop) => stop())));

  it('counts the crashes, turns not ready while they repeat, and ready again once they stop', async () => {
    await createTestTopics([topic], 1);
    const producer = testKafka().producer();
    await producer.connect();
    await producer.send(topic, [{ key: 'k', value: 'poison' }]);
    await producer.disconnect();

    let now = Date.now();
    const health = new ConsumerHealth({
      logger: silentLogger,
      crashLimit: 3,
      windowMs: 60_000,
      now: () => now,
    });
    const group = uniqueName('crashing');
    // No retries inside the client: each failing batch is a crash, and a restart.
    const consumer = testKafka().consumer({ groupId: group, retries: 0 });
    stops.push(() => consumer.stop());
    health.watch(consumer, group);
    expect(health.ready).toBe(true);
    let failing = true;
    await consumer.start({
      topics: [topic],
      fromBeginning: true,
      commit: 'after-batch',
      onBatch: async () => {
        if (failing) throw new Error('cannot process this record');
      },
    });
    await eventually(async () => (await crashCount(group)) >= 3, 30_000, 'three crashes counted');
    expect(health.ready).toBe(false);
    failing = false;
    now += 61_000; // the crashes age out of the window
    expect(health.ready).toBe(true);
  });

  it('forgets the crashes of a broker it could not reach once the consumer joins its group again, and says so', async () => {
    const cutTopic = uniqueName('health-cut');
    await createTestTopics([cutTopic], 1);
    // The consumer reaches the broker through a fault proxy (its other connections go direct).
    const broker = TEST_KAFKA_BROKERS.split(',')[0] as string;
    const proxy = await startFaultProxy(broker);
    const unroute = routeConnections({ [broker]: proxy.address });
    const group = uniqueName('cut');
    const consumer = testKafka().consumer({ groupId: group, retries: 0 });
    try {
      // A window far longer than the test: only the join may clear these crashes.
      const { logger, lines } = capturingLogger('info');
      const rejoined = () =>
        lines.filter((l) => l.msg === 'Kafka consumer joined its group again after a crash');
      const health = new ConsumerHealth({ logger, crashLimit: 3, windowMs: 3_600_000 });
      health.watch(consumer, group);
      let joins = 0;
      consumer.onAssigned(() => joins++);
      await consumer.start({
        topics: [cutTopic],
        fromBeginning: true,
        commit: 'after-batch',
        onBatch: async () => {},
      });
      await eventually(async () => joins >= 1, 30_000, 'the first join');
      expect(rejoined()).toEqual([]);
      proxy.partition();
      await eventually(async () => (await crashCount(group)) >= 3, 60_000, 'three crashes counted');
      expect(health.ready).toBe(false);
      const before = joins;
      proxy.heal();
      await eventually(async () => joins > before, 60_000, 'the group joined again');
      expect(health.ready).toBe(true);
      expect(rejoined().map((l) => l.group)).toEqual([group]);
    } finally {
      await consumer.stop();
      unroute();
      await proxy.close();
    }
  }, 150_000);
});
