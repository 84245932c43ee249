import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from './fault-proxy.ts';
import { createTestTopics, TEST_KAFKA_BROKERS, testKafka, uniqueName } from './index.ts';
import { parseBrokerRoutes, routeConnections } from './kafka-route.ts';

/**
 * Against the real local broker: once rerouted, every kafkajs connection of the process goes
 * through the fault proxy (the producer's and the fetcher's, which has its own cluster), so a
 * partition of the proxy is a partition from Kafka even after the broker advertised itself.
 */
describe('Kafka connections rerouted through a fault proxy', () => {
  const topic = uniqueName('route');
  let proxy: FaultProxy;
  let unroute: () => void;

  beforeAll(async () => {
    await createTestTopics([topic], 1);
    proxy = await startFaultProxy(TEST_KAFKA_BROKERS.split(',')[0] as string);
    unroute = routeConnections({ [TEST_KAFKA_BROKERS.split(',')[0] as string]: proxy.address });
  });
  afterAll(async () => {
    unroute?.();
    await proxy?.close();
  });

  it('parses the variable the preload reads', () => {
    expect(parseBrokerRoutes('127.0.0.1:9092=127.0.0.1:4001, a:1=b:2')).toEqual({
      '127.0.0.1:9092': '127.0.0.1:4001',
      'a:1': 'b:2',
    });
  });

  it('carries the producer and the fetcher, and a partition cuts both until healed', async () => {
    const kafka = testKafka();
    const producer = kafka.producer();
    const fetcher = kafka.fetcher({ timeoutMs: 2_000 });
    try {
      await producer.connect();
      await producer.send(topic, [{ partition: 0, key: 'k', value: 'first' }]);
      const ref = { topic, partition: 0, offset: '0' };
      expect(String((await fetcher.fetch(ref)).value)).toBe('first');
      const accepted = proxy.accepted;
      expect(accepted).toBeGreaterThanOrEqual(2);

      proxy.partition();
      await expect(producer.send(topic, [{ partition: 0, key: 'k', value: 'cut' }], 2_000)).rejects.toThrow();
      await expect(fetcher.fetch({ ...ref, offset: '1' })).rejects.toThrow();

      proxy.heal();
      await producer.send(topic, [{ partition: 0, key: 'k', value: 'second' }]);
      const second = await fetcher.fetchMany([
        { ...ref, offset: '1' },
        { ...ref, offset: '2' },
      ]);
      const values = second.flatMap((o) => (o.ok ? [String(o.record.value)] : []));
      expect(values).toContain('second');
      expect(proxy.accepted).toBeGreaterThan(accepted);
    } finally {
      await producer.disconnect();
      await fetcher.close();
    }
  });
});
