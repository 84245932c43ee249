import {
  BIG_RECORD_BYTES,
  type KafkaProducer,
  type OutgoingRecord,
  PARTITION_BATCH_BYTES,
  type ProducedBatch,
  type RecordHeaders,
} from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import { decodeQueuedTask, encodeQueuedTask } from '@requester/shared/task';
import type { Route, SourceRecord } from './route.ts';

const copies = counter(
  'router_body_copies_total',
  'big records of in that came in a big record batch with others, copied alone to the bodies topic (copied), or left where they were because the copy failed (failed)',
  ['outcome'],
);

/** Names the `in` record a copy on the bodies topic was made from (`topic/partition/offset`). */
export const BODY_OF_HEADER = 'requester-body-of';

/** After a failed copy, records are left where they are for this long (a missing topic, a broker away). */
const PAUSE_AFTER_FAILURE_MS = 60_000;

/**
 * Whether the executor's read of `record` by offset would receive a big batch of other records:
 * the broker sends whole record batches, and an outside producer batches as it likes (kafkajs puts
 * a send's records of a partition in one batch, librdkafka and the Java client fill theirs up to
 * linger.ms / batch.size). Requester's own writers keep a big record's batch within
 * PARTITION_BATCH_BYTES, so their records never qualify.
 */
export function wantsOwnBatch(record: SourceRecord): boolean {
  const { batch, value } = record;
  if (!batch || !value || value.length < BIG_RECORD_BYTES) return false;
  return batch.records > 1 && batch.bytes > PARTITION_BATCH_BYTES;
}

export interface BodyCopiesOptions {
  producer: KafkaProducer;
  /** The bodies topic (KAFKA_TOPIC_BODIES). */
  topic: string;
  produceTimeoutMs: number;
  logger: Logger;
}

/**
 * Copies big records that came batched with others (wantsOwnBatch) to the bodies topic, each in a
 * record batch of its own, and points their tasks at the copy: the executor then receives about the
 * record it reads, whatever batching the producer used (docs/architecture.md §9, "Big records from
 * outside producers"). Copies go out in rounds, one copy per partition of the bodies topic in a
 * round, so that one produce request carries several copies yet each stays alone in its batch (a
 * request per copy made the router and the broker pay a request's fixed cost for every copy). The
 * copy is written before the task is published and the batch committed, so a crash in between
 * leaves at most an unread copy; a copy that fails leaves the task on its `in` record, which is as
 * valid, only dearer to read.
 */
export class BodyCopies {
  private readonly options: BodyCopiesOptions;
  private pausedUntil = 0;
  /** The partition the next round starts at, so that rounds of few copies spread over all of them. */
  private next = 0;

  constructor(options: BodyCopiesOptions) {
    this.options = options;
  }

  async copy(routes: Array<{ record: SourceRecord; route: Route }>): Promise<void> {
    if (Date.now() < this.pausedUntil) return;
    const wanted = routes.filter(
      ({ record, route }) => route.kind === 'queue' && wantsOwnBatch(record) && singleValued(record.headers),
    );
    if (wanted.length === 0) return;
    const { producer, topic } = this.options;
    let partitions = producer.partitionCount(topic);
    let rest = wanted;
    if (partitions === undefined) {
      // The producer learns a topic's partitions from its first send there: that copy goes alone,
      // placed by its key.
      await this.round(wanted.slice(0, 1), undefined);
      partitions = producer.partitionCount(topic) ?? 1;
      rest = wanted.slice(1);
    }
    const count = partitions;
    await Promise.all(roundsOf(rest, count).map((round) => this.round(round, count)));
  }

  /** Writes one round (at most one copy per partition) in one send, and points its tasks at the copies. */
  private async round(
    round: Array<{ record: SourceRecord; route: Route }>,
    partitions: number | undefined,
  ): Promise<void> {
    if (round.length === 0 || Date.now() < this.pausedUntil) return;
    const { producer, topic, produceTimeoutMs } = this.options;
    const first = this.next;
    if (partitions !== undefined) this.next = (first + round.length) % partitions;
    const placed = round.map(({ record }, i) =>
      copyOf(record, partitions === undefined ? undefined : (first + i) % partitions),
    );
    let written: ProducedBatch[];
    try {
      const produced = await producer.send(topic, placed, produceTimeoutMs, { readByOffset: true });
      const byPartition = new Map(produced.map((at) => [at.partition, at]));
      written = placed.map((copy) => {
        const at = copy.partition === undefined ? produced[0] : byPartition.get(copy.partition);
        if (!at || at.baseOffset === '-1') throw new Error(`no offset answered for a copy on ${topic}`);
        return at;
      });
    } catch (err) {
      copies.inc({ outcome: 'failed' }, round.length);
      if (Date.now() >= this.pausedUntil)
        this.options.logger.warn(
          {
            err,
            topic,
            records: round.map(({ record }) => `${record.topic}/${record.partition}/${record.offset}`),
          },
          `copying big batched records to ${topic} failed: their tasks read them where they are, and no copies are made for ${PAUSE_AFTER_FAILURE_MS / 1000} s`,
        );
      this.pausedUntil = Date.now() + PAUSE_AFTER_FAILURE_MS;
      return;
    }
    round.forEach((routed, i) => {
      const { record, route } = routed;
      const at = written[i];
      if (route.kind !== 'queue' || !at) return;
      const task = decodeQueuedTask(route.task.payload);
      const payload = encodeQueuedTask({
        ...task,
        ref: { topic: at.topic, partition: at.partition, offset: at.baseOffset },
        entryTopic: record.topic,
      });
      routed.route = { ...route, task: { ...route.task, payload } };
    });
    copies.inc({ outcome: 'copied' }, round.length);
  }
}

/** `items` in rounds of at most `partitions`, in order. */
function roundsOf<T>(items: T[], partitions: number): T[][] {
  const size = Math.max(1, partitions);
  const rounds: T[][] = [];
  for (let i = 0; i < items.length; i += size) rounds.push(items.slice(i, i + size));
  return rounds;
}

function copyOf(record: SourceRecord, partition: number | undefined): OutgoingRecord {
  const headers: Record<string, Buffer | string> = {};
  for (const [name, value] of Object.entries(record.headers ?? {}))
    if (value !== undefined && !Array.isArray(value)) headers[name] = value;
  headers[BODY_OF_HEADER] = `${record.topic}/${record.partition}/${record.offset}`;
  return { key: record.key, value: record.value, headers, ...(partition === undefined ? {} : { partition }) };
}

/** A header given twice would not survive the copy as it is (OutgoingRecord holds one value each). */
function singleValued(headers: RecordHeaders | undefined): boolean {
  return Object.values(headers ?? {}).every((value) => !Array.isArray(value));
}
