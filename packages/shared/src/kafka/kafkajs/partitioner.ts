import { Partitioners } from 'kafkajs';

const defaultPartitioner = Partitioners.DefaultPartitioner();

/** The partition the adapter's producer (kafkajs's default partitioner, murmur2) writes `key` to. */
export function partitionOfKey(key: string | Buffer, partitions: number): number {
  const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({
    partitionId,
    leader: 0,
    replicas: [0],
    isr: [0],
    partitionErrorCode: 0,
  }));
  return defaultPartitioner({ topic: '', partitionMetadata, message: { key, value: null } });
}
