import { Kafka, logLevel } from 'kafkajs';
import type { Logger } from '../../log/index.ts';
import type { KafkaSecurity } from '../security.ts';
import type {
  ConsumerOptions,
  FetcherOptions,
  KafkaAdmin,
  KafkaClient,
  KafkaConsumer,
  KafkaProducer,
} from '../types.ts';
import { KafkajsAdmin } from './admin.ts';
import { KafkajsConsumer } from './consumer.ts';
import { installCrc32c } from './crc32c.ts';
import { createFetcher } from './fetcher/index.ts';
import { brokerList, kafkajsSecurity, kafkaLogCreator } from './options.ts';
import { KafkajsProducer } from './producer.ts';

/**
 * The kafkajs adapter: the one place that imports kafkajs. It implements Requester's Kafka
 * interface (../types.ts) and routes kafkajs logs into pino. See ../README.md for its sharp edges.
 */
export interface KafkaSettings {
  brokers: string;
  clientId: string;
  logger: Logger;
  /** Default bound on one produce round trip (acks from all in-sync replicas). */
  produceTimeoutMs?: number;
  /** TLS and SASL towards the brokers (default: neither). */
  security?: KafkaSecurity;
}

// Before any produce: record batch checksums are computed natively when the binary is there.
installCrc32c();

export function createKafka(settings: KafkaSettings): KafkaClient {
  return new KafkajsClient(settings);
}

class KafkajsClient implements KafkaClient {
  private readonly kafka: Kafka;
  private readonly settings: KafkaSettings;

  constructor(settings: KafkaSettings) {
    this.settings = settings;
    const log = settings.logger.child({ component: 'kafkajs' });
    this.kafka = new Kafka({
      clientId: settings.clientId,
      brokers: brokerList(settings.brokers),
      ...kafkajsSecurity(settings.security),
      connectionTimeout: 3_000,
      requestTimeout: 30_000,
      // Backoff capped at 1 s (the cap of Kafka's own clients, reconnect.backoff.max.ms): an operation
      // retrying through an outage tries again at most 1 s after the broker is back, where a 5 s cap
      // held results up to 5 s (docs/benchmarks/kafka-restart.md). 19 retries keep the ~16 s an
      // operation retried for before it fails.
      retry: { initialRetryTime: 100, retries: 19, maxRetryTime: 1_000 },
      logLevel: logLevel.WARN,
      logCreator: kafkaLogCreator(log),
    });
  }

  consumer(options: ConsumerOptions): KafkaConsumer {
    return new KafkajsConsumer(this.kafka, options);
  }

  producer(): KafkaProducer {
    return new KafkajsProducer(this.kafka, this.settings.produceTimeoutMs);
  }

  admin(): KafkaAdmin {
    return new KafkajsAdmin(this.kafka.admin());
  }

  fetcher(options: FetcherOptions = {}) {
    const { brokers, clientId, logger, security } = this.settings;
    return createFetcher({ ...options, brokers, clientId, logger, ...(security ? { security } : {}) });
  }
}
