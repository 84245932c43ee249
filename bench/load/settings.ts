/** bench/load.ts's command line, what follows from it, and the clients and child processes it shares. */
import { createRequire } from 'node:module';
import path from 'node:path';
import { createKafka, createLogger, type KafkaClient } from '../../packages/shared/src/index.ts';
import { childProcesses, envPairs, parseBenchArgs } from '../harness.ts';

// A plain kafkajs client for --producer kafkajs (the root package does not depend on kafkajs).
interface PlainKafkaClient {
  producer(): {
    connect(): Promise<void>;
    send(batch: {
      topic: string;
      messages: Array<{ key: string; value: string; partition: number | undefined }>;
    }): Promise<unknown>;
    disconnect(): Promise<void>;
  };
  admin(): {
    connect(): Promise<void>;
    fetchTopicOffsets(topic: string): Promise<unknown[]>;
    disconnect(): Promise<void>;
  };
}
export const { Kafka: PlainKafka } = createRequire(
  path.resolve(import.meta.dirname, '../../packages/shared/package.json'),
)('kafkajs') as {
  Kafka: new (config: { clientId: string; brokers: string[]; logLevel: number }) => PlainKafkaClient;
};

export type Mode = 'http-async' | 'sync' | 'kafka';

export const { values: args, fail } = parseBenchArgs({
  usage: `End-to-end load harness: a whole Requester (requester --role all, a child process on its own
topics, Redis prefix and database) against the project's test target (another child process),
driven over HTTP (async or sync) or straight into Kafka, results counted on out.

  pnpm run bench:load -- --mode ...   (or: node bench/load.ts, on the project's Node 24)
  node bench/load.ts --mode http-async|sync|kafka [--count 20000] [--connections 64]
       [--body 100] [--rounds 3] [--baseline /tmp/baseline] [--limit 120 (s)] [--env K=V,...]

With --baseline <checkout>, a second Requester runs from that checkout and the rounds alternate
between the two, the order flipped each round; the report gives the ratio new / baseline of the
medians.

As run for docs/benchmarks/load.md:
  pnpm run bench:load -- --mode http-async --count 20000 --connections 64 --rounds 2 --baseline /tmp/baseline`,
  options: {
    mode: {
      type: 'string',
      default: 'http-async',
      value: 'http-async|sync|kafka',
      help: 'how requests are sent',
    },
    count: { type: 'string', default: '20000', value: 'N', number: true, help: 'requests per round' },
    connections: { type: 'string', default: '64', value: 'N', number: true, help: 'HTTP connections' },
    body: { type: 'string', default: '100', value: 'BYTES', number: true, help: 'request body size' },
    rounds: { type: 'string', default: '1', value: 'N', number: true, help: 'rounds per side' },
    baseline: {
      type: 'string',
      value: '<checkout>',
      help: 'a second Requester from that checkout (e.g. a worktree of main, node_modules installed)',
    },
    limit: { type: 'string', default: '120', value: 'S', number: true, help: 'seconds a round may take' },
    env: { type: 'string', default: '', value: 'K=V,...', help: 'extra environment of the Requester(s)' },
    roles: {
      type: 'string',
      default: 'all',
      value: 'ROLES',
      help: 'roles of the Requester(s) under test (e.g. ingress,sync-gateway: accepts alone, nothing consumes in)',
    },
    executors: {
      type: 'string',
      value: '1,2',
      help: 'one side per count, all from this checkout: --role ingress,sync-gateway,router,relay plus requester --role executor --processes N (CPU of the executors summed)',
    },
    producer: {
      type: 'string',
      default: 'requester',
      value: 'requester|kafkajs',
      help: "--mode kafka: who writes in: Requester's own producer (512 KiB requests), or a plain kafkajs producer as an outside one (its default partitioner and batching: a send of 100 records is one batch per partition)",
    },
    'batch-bytes': {
      type: 'string',
      default: '0',
      value: 'BYTES',
      number: true,
      help: '--producer kafkajs: each send carries records of one partition (round-robin) up to BYTES, one record batch (e.g. 1048576, as librdkafka with linger.ms or the Java client with batch.size fill them); 0 = sends of 100 keyed records',
    },
    answer: {
      type: 'string',
      default: 'echo',
      value: 'echo|ok',
      help: "what the test target answers: the request's body (/echo), or `ok` whatever the body (/ok: a call whose answer is small, as most are)",
    },
    wake: {
      type: 'boolean',
      default: false,
      help: "wake-ups: an empty request.uri, nobody is called (Requester's own cost per task)",
    },
    'profile-rounds': {
      type: 'boolean',
      default: false,
      help: "a CPU and an allocation profile of each round (bench/profile-rounds.ts preloaded): bytes allocated per task, node CPU per task without the HTTP call's share",
    },
    'profile-cpu': {
      type: 'boolean',
      default: false,
      help: "--profile-rounds without the allocation profile, whose sampling inflates the node CPU measured beside it: the truer node CPU per task without the HTTP call's share",
    },
    together: {
      type: 'boolean',
      default: false,
      help: "with --baseline: both sides' rounds at once (each its own requests, the one target), so that both meet the same moments of a shared, noisy box; the node CPU per task of each, side by side, at half the rate each would have alone",
    },
    stages: {
      type: 'boolean',
      default: false,
      help: 'per-stage latencies of each side, read back from its task journal',
    },
    memory: {
      type: 'boolean',
      default: false,
      help: "each side's RSS and heap after every round and after --idle seconds at the end, and its collections of the round by kind",
    },
    idle: {
      type: 'string',
      default: '20',
      value: 'S',
      number: true,
      help: 'seconds idle before the last --memory sample',
    },
    'idle-cpu': {
      type: 'string',
      default: '0',
      value: 'S',
      number: true,
      help: "each side's CPU while idle, over S seconds after the warm-up (its fixed cost: timers, polls), and each round's node CPU per task beyond it",
    },
    brokers: { type: 'string', default: '127.0.0.1:9092', value: 'HOST:PORT', help: 'Kafka brokers' },
  },
});

export const mode = args.mode as Mode;
if (!['http-async', 'sync', 'kafka'].includes(mode))
  fail(`--mode must be http-async, sync or kafka, got ${mode}`);
if (!['requester', 'kafkajs'].includes(args.producer as string))
  fail(`--producer must be requester or kafkajs, got ${args.producer}`);
if (!['echo', 'ok'].includes(args.answer as string)) fail(`--answer must be echo or ok, got ${args.answer}`);
/** The test target's path the requests call (`/echo` or `/ok`). */
export const targetPath = `/${args.answer}`;
export const batchBytes = Number(args['batch-bytes']);
export const count = Number(args.count);
export const connections = Number(args.connections);
export const bodyBytes = Number(args.body);
export const rounds = Number(args.rounds);
/** Seconds one round may take at most: what is unfinished by then is reported as such. */
export const limitMs = Number(args.limit) * 1000;
export const extraEnv = envPairs(args.env);
export const profileCpuOnly = Boolean(args['profile-cpu']);
export const profileRounds = Boolean(args['profile-rounds']) || profileCpuOnly;
if (profileCpuOnly) extraEnv.PROFILE_ROUNDS = 'cpu';
if (profileRounds)
  // This checkout's copy for every side: the baseline's may predate it.
  extraEnv.NODE_OPTIONS =
    `${extraEnv.NODE_OPTIONS ?? ''} --import=${path.resolve(import.meta.dirname, '../profile-rounds.ts')}`.trim();
/** Executor process counts to compare (--executors): one Requester per count, same checkout. */
export const executorCounts = (args.executors ?? '').split(',').filter(Boolean).map(Number);
/** Whether the Requester(s) run the whole pipeline (results are counted per completed task). */
export const pipeline = args.roles === 'all' || executorCounts.length > 0;
export const here = path.resolve(import.meta.dirname, '../..');
const silent = createLogger({ level: 'silent' });
export const kafka: KafkaClient = createKafka({
  brokers: args.brokers,
  clientId: 'bench-load',
  logger: silent,
});

export const children = childProcesses();
