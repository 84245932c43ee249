import { type Consumer, Kafka, logLevel, type Producer } from 'kafkajs';

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
  const producer = kafka.producer();
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
