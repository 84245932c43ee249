import { afterAll, describe, expect, it } from 'vitest';
import { registry } from '../metrics/index.ts';
import { createTestTopics, eventually, silentLogger, testKafka, uniqueName } from '../testing/index.ts';
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
});
