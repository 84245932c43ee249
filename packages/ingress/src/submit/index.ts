import type { EntrySigner } from '@requester/shared/entry';
import { CHANNEL_HEADER } from '@requester/shared/journal';
import { type KafkaProducer, type OutgoingRecord, withTimeout } from '@requester/shared/kafka';
import type { Submit } from '../api/index.ts';

export interface SubmitBatching {
  /**
   * INGRESS_LINGER: how long accepted envelopes wait for company while a produce is already in
   * flight (at most: they go as soon as no produce is in flight). When none is, a batch goes out
   * at the next turn of the event loop (whatever arrived in the same turn shares it), so an idle
   * ingress adds no wait to a lone caller.
   */
  lingerMs: number;
  /** INGRESS_BATCH_BYTES: a batch this big goes out at once, without waiting for the linger. */
  maxBatchBytes: number;
}

/**
 * How the ingress writes accepted envelopes to `in`: acks from every in-sync replica, and each
 * caller's wait (getting a connected producer and its batch's linger included) bounded by
 * `timeoutMs`, so an unreachable broker turns into a prompt 503 instead of a hung caller.
 *
 * Envelopes accepted together share one produce request (micro-batching, see SubmitBatching): one
 * produce per request cost the broker and the Kafka client far more than the request itself.
 * Every caller of a batch is answered when that batch is acked, and a failed batch fails each of
 * its callers: nothing is answered 202 without its record's ack.
 *
 * A timeout does not cancel a send the Kafka client already has in flight: in the worst case a request
 * answered 503 is still written, and the caller's retry (same requestId) is a duplicate that the
 * router's dedup absorbs. The reverse, a 202 for a request that was not written, cannot happen.
 *
 * With a `signer` (AUTH=on), each record is signed (docs/architecture.md §10): the router then
 * trusts the `meta.client` the ingress set; an unsigned record may claim only Kafka-entry clients.
 */
export function kafkaSubmit(
  producer: () => Promise<KafkaProducer>,
  topic: string,
  timeoutMs: number,
  batching: SubmitBatching = { lingerMs: 0, maxBatchBytes: 0 },
  signer?: EntrySigner,
): Submit {
  const batcher = new ProduceBatcher(
    // `in` is read by offset (the executor's fetcher): big records in small batches (SendOptions).
    (records) => producer().then((p) => p.send(topic, records, timeoutMs, { readByOffset: true })),
    batching,
  );
  return async (key, value, headers) => {
    // The channel header tells the router that this request's journal began here (`accepted` over http).
    const marked = { ...headers, ...CHANNEL };
    const sent = batcher.add({ key, value, headers: signer ? signer.signed(value, marked) : marked });
    sent.catch(() => {}); // a late rejection after the timeout already answered is not unhandled
    await withTimeout(sent, timeoutMs, `produce to ${topic} timed out after ${timeoutMs} ms`);
  };
}

const CHANNEL = { [CHANNEL_HEADER]: 'http' };

interface Waiting {
  record: OutgoingRecord;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** Gathers records into batches and hands each batch to `send`; see SubmitBatching for when. */
class ProduceBatcher {
  private readonly send: (records: OutgoingRecord[]) => Promise<unknown>;
  private readonly batching: SubmitBatching;
  private waiting: Waiting[] = [];
  private bytes = 0;
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  private inFlight = 0;

  constructor(send: (records: OutgoingRecord[]) => Promise<unknown>, batching: SubmitBatching) {
    this.send = send;
    this.batching = batching;
  }

  /** Resolves when the batch holding `record` is acked; rejects with that batch's error. */
  add(record: OutgoingRecord): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ record, resolve, reject });
      this.bytes += sizeOf(record.key) + sizeOf(record.value);
      if (this.batching.maxBatchBytes > 0 && this.bytes >= this.batching.maxBatchBytes) this.flush();
      else this.schedule();
    });
  }

  private schedule(): void {
    if (this.timer) return;
    const { lingerMs } = this.batching;
    this.timer =
      this.inFlight > 0 && lingerMs > 0
        ? setTimeout(() => this.flush(), lingerMs)
        : setImmediate(() => this.flush());
  }

  private flush(): void {
    if (this.timer) {
      clearTimeout(this.timer as NodeJS.Timeout);
      clearImmediate(this.timer as NodeJS.Immediate);
      this.timer = undefined;
    }
    const batch = this.waiting;
    if (batch.length === 0) return;
    this.waiting = [];
    this.bytes = 0;
    this.inFlight++;
    let sending: Promise<unknown>;
    try {
      sending = this.send(batch.map((w) => w.record));
    } catch (err) {
      sending = Promise.reject(err);
    }
    sending.then(
      () => {
        this.settled();
        for (const w of batch) w.resolve();
      },
      (err: unknown) => {
        this.settled();
        for (const w of batch) w.reject(err);
      },
    );
  }

  /** The last produce in flight is done: what lingers for company has waited long enough. */
  private settled(): void {
    this.inFlight--;
    if (this.inFlight === 0 && this.waiting.length > 0) this.flush();
  }
}

/** Close enough to bytes for a batch bound (a string's length undercounts non-ASCII only). */
function sizeOf(data: Buffer | string | null | undefined): number {
  return data?.length ?? 0;
}
