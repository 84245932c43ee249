import { type Consumer, Kafka, logLevel, Partitioners, type Producer } from 'kafkajs';

/** A kafkajs producer and consumer, connected: what the producer and the reader of `out` use. */
export async function connectKafka(options: {
  brokers: string[];
  groupId: string;
}): Promise<{ producer: Producer; consumer: Consumer; close(): Promise<void> }> {
  const kafka = new Kafka({
    clientId: 'requester-example',
    brokers: options.brokers,
    logLevel: logLevel.WARN,
  });
  // The Java-compatible partitioner, as Requester's own producers use: one ordered partition's
  // records then land on one Kafka partition whoever writes them.
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const consumer = kafka.consumer({ groupId: options.groupId });
  await Promise.all([producer.connect(), consumer.connect()]);
  return {
    producer,
    consumer,
    close: async () => {
      await Promise.all([producer.disconnect(), consumer.disconnect()]);
    },
  };
}
