/**
 * The kafkajs internals the fetcher drives: its low-level cluster (metadata, leaders, one Fetch per
 * broker, ListOffsets), typed with what the fetcher uses of them. kafkajs has no public "read
 * offset N" call; nothing else in Requester reaches past its public API.
 *
 * @module
 */

import { createRequire } from 'node:module';
import type { IHeaders, logCreator as LogCreator } from 'kafkajs';
import type { Logger } from '../../../log/index.ts';
import type { KafkaSecurity } from '../../security.ts';
import { brokerList, kafkajsSecurity, kafkaLogCreator } from '../options.ts';

// kafkajs has no `exports` map, so its internals are reachable by path; they are CommonJS.
const require = createRequire(import.meta.url);
const Cluster = require('kafkajs/src/cluster') as new (options: Record<string, unknown>) => LowLevelCluster;
const socketFactory = require('kafkajs/src/network/socketFactory') as () => unknown;
const kafkaLoggers = require('kafkajs/src/loggers') as {
  createLogger(options: { level: number; logCreator: LogCreator }): unknown;
  LEVELS: Record<'NOTHING' | 'ERROR' | 'WARN' | 'INFO' | 'DEBUG', number>;
};
export const READ_COMMITTED = 1;

export interface RawRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: IHeaders;
  timestamp: string;
  isControlRecord: boolean;
}

export interface FetchResponse {
  responses: Array<{ topicName: string; partitions: Array<{ partition: number; messages: RawRecord[] }> }>;
}

export interface LowLevelBroker {
  fetch(request: {
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    isolationLevel: number;
    topics: Array<{
      topic: string;
      partitions: Array<{ partition: number; fetchOffset: string; maxBytes: number }>;
    }>;
  }): Promise<FetchResponse>;
}

export interface LowLevelCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  findTopicPartitionMetadata(topic: string): Array<{ partitionId: number; leader: number | null }>;
  findBroker(query: { nodeId: string }): Promise<LowLevelBroker>;
  fetchTopicsOffset(
    topics: Array<{
      topic: string;
      partitions: Array<{ partition: number }>;
      fromBeginning?: boolean;
      fromTimestamp?: number;
    }>,
  ): Promise<Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>>;
}

export interface ClusterSettings {
  brokers: string;
  clientId: string;
  security?: KafkaSecurity;
  /** Bound on one request to a broker. */
  requestTimeoutMs: number;
}

/** A low-level cluster of its own (connections, metadata), logging through `log`. */
export function lowLevelCluster(settings: ClusterSettings, log: Logger): LowLevelCluster {
  return new Cluster({
    logger: kafkaLoggers.createLogger({
      level: kafkaLoggers.LEVELS.WARN,
      logCreator: kafkaLogCreator(log),
    }),
    socketFactory: socketFactory(),
    brokers: brokerList(settings.brokers),
    ...kafkajsSecurity(settings.security),
    clientId: `${settings.clientId}-fetcher`,
    connectionTimeout: 3_000,
    requestTimeout: settings.requestTimeoutMs,
    enforceRequestTimeout: true,
    metadataMaxAge: 300_000,
    retry: { initialRetryTime: 100, retries: 3, maxRetryTime: 1_000 },
    allowAutoTopicCreation: false,
    maxInFlightRequests: null,
    isolationLevel: READ_COMMITTED,
  });
}

/** The leader of a topic-partition in the cluster's metadata, or undefined when none is known. */
export function leaderOf(cluster: LowLevelCluster, topic: string, partition: number): number | undefined {
  return (
    cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)?.leader ?? undefined
  );
}
