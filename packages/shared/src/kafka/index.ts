/**
 * Requester's Kafka interface (types.ts) and what is built on it. The client library behind it is
 * chosen here, once: everything else imports this module, never a Kafka client.
 */
export {
  BIG_RECORD_BYTES,
  chunksOf,
  PARTITION_BATCH_BYTES,
  PRODUCE_CHUNK_BYTES,
  withTimeout,
} from './batching.ts';
export { ConsumerHealth, type ConsumerHealthOptions, CRASH_LIMIT, CRASH_WINDOW_MS } from './health.ts';
export { explainKafkaError, isMessageTooLargeError, isRetriableKafkaError } from './kafkajs/errors.ts';
export { createKafka, type KafkaSettings } from './kafkajs/index.ts';
export { type ScanOptions, type ScanResult, scanTopic } from './scan.ts';
export { type KafkaSecurity, kafkaSecurityFrom, type SaslMechanism } from './security.ts';
export {
  type Assignment,
  type BatchContext,
  type ConsumeOptions,
  type ConsumerCrash,
  type ConsumerOptions,
  type FetchedRecord,
  type Fetcher,
  type FetcherCacheStats,
  type FetcherOptions,
  type FetchOutcome,
  headerText,
  type KafkaAdmin,
  type KafkaClient,
  type KafkaConsumer,
  type KafkaProducer,
  type KafkaRecord,
  type KafkaRef,
  type OutgoingRecord,
  type PartitionOffsets,
  type ProducedBatch,
  type RecordBatch,
  type RecordBatchShape,
  type RecordHeaders,
  RecordUnavailableError,
  type SendOptions,
  type TopicSpec,
} from './types.ts';
