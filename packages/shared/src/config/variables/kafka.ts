/** The Kafka cluster: brokers, topics, security, client bounds. */

import { z } from 'zod';
import { bool, goDuration, hostPortList, positiveInt, secretText } from '../values.ts';
import { variable } from '../variable.ts';

export const kafkaVariables = {
  kafkaBrokers: variable(
    'KAFKA_BROKERS',
    '127.0.0.1:9092',
    z.string().min(1),
    'comma-separated Kafka bootstrap brokers',
  ),
  kafkaControllers: variable(
    'KAFKA_CONTROLLERS',
    undefined,
    hostPortList.optional(),
    "comma-separated KRaft controller listeners (host:port) of the Kafka cluster, which clients never use but a request could reach: refused as targets like the brokers. Default: each bootstrap broker's host at its port + 1 (infra/kafka.sh's layout, e.g. 9093 beside 9092)",
  ),
  kafkaClientId: variable(
    'KAFKA_CLIENT_ID',
    'requester',
    z.string().min(1),
    'Kafka client id (suffixed by role)',
  ),
  kafkaRouterGroup: variable(
    'KAFKA_ROUTER_GROUP',
    undefined,
    z.string().min(1).optional(),
    'consumer group of the routers on KAFKA_TOPIC_IN. Default: `<KAFKA_CLIENT_ID>-router` for the default `requester.in`, else `<KAFKA_CLIENT_ID>-router.<KAFKA_TOPIC_IN>`, so that two deployments on one broker with other topics never share a group (a member of a shared group is assigned partitions of the other deployment’s topic and leaves them unread)',
  ),
  topicIn: variable('KAFKA_TOPIC_IN', 'requester.in', z.string().min(1), 'topic of incoming requests'),
  topicOut: variable('KAFKA_TOPIC_OUT', 'requester.out', z.string().min(1), 'topic of results'),
  topicDlq: variable(
    'KAFKA_TOPIC_DLQ',
    'requester.dlq',
    z.string().min(1),
    'topic of dead-lettered requests',
  ),
  topicEvents: variable(
    'KAFKA_TOPIC_EVENTS',
    'requester.events',
    z.string().min(1),
    'topic of the task journal (one event per step of a request, keyed by requestId; `requester trace`)',
  ),
  topicBodies: variable(
    'KAFKA_TOPIC_BODIES',
    undefined,
    z.string().min(1).optional(),
    'topic of the routers’ copies of big `in` records that an outside producer batched with others (ROUTER_BODY_COPIES), each in a record batch of its own, for the executors to read by offset; nothing consumes it, its retention must match `in`’s. Default: `<KAFKA_TOPIC_IN>.bodies`',
  ),
  topicPartitions: variable(
    'KAFKA_TOPIC_PARTITIONS',
    '12',
    positiveInt,
    'partitions of the topics Requester creates',
  ),
  topicReplication: variable(
    'KAFKA_TOPIC_REPLICATION',
    '1',
    positiveInt,
    'replication factor of the topics Requester creates',
  ),
  kafkaMaxMessageBytes: variable(
    'KAFKA_MAX_MESSAGE_BYTES',
    '10485760',
    positiveInt,
    'max.message.bytes of the topics Requester creates (a 1 MiB body grows when JSON-escaped); a result bigger than this answers 502 payload_too_large',
  ),
  kafkaSessionTimeout: variable(
    'KAFKA_SESSION_TIMEOUT',
    '10s',
    goDuration.refine((ms) => ms >= 6_000, 'must be at least 6s (the broker refuses shorter sessions)'),
    'consumer group session of routers and sync-gateways: how long a dead member (a killed process, or one lost in a broker crash) holds its partitions before the group moves on',
  ),
  kafkaSsl: variable(
    'KAFKA_SSL',
    'false',
    bool,
    'TLS to the Kafka brokers (the system CAs are trusted, or KAFKA_SSL_CA)',
  ),
  kafkaSslCa: variable(
    'KAFKA_SSL_CA',
    undefined,
    z.string().optional(),
    'PEM file of the CA certificates to trust for the Kafka brokers (implies KAFKA_SSL)',
  ),
  kafkaSaslMechanism: variable(
    'KAFKA_SASL_MECHANISM',
    undefined,
    z.enum(['plain', 'scram-sha-256', 'scram-sha-512']).optional(),
    'SASL authentication to Kafka: plain, scram-sha-256 or scram-sha-512 (use TLS with plain); unset = none',
  ),
  kafkaSaslUsername: variable('KAFKA_SASL_USERNAME', undefined, z.string().optional(), 'SASL user name'),
  kafkaSaslPassword: variable(
    'KAFKA_SASL_PASSWORD',
    undefined,
    secretText.optional(),
    'SASL password. Never printed',
  ),
  createTopics: variable('KAFKA_CREATE_TOPICS', 'true', bool, 'create missing topics at start'),
  kafkaProduceTimeout: variable(
    'KAFKA_PRODUCE_TIMEOUT',
    '10s',
    goDuration,
    'bound on one produce (ack from the broker)',
  ),
};
