import { originOf } from '@requester/policies';
import {
  type AnyDeadLetter,
  clientScoped,
  type DeadLetter,
  deadLetterRequestId,
  type EntrySigner,
  type Fetcher,
  formatRecordRef,
  type Journal,
  type KafkaClient,
  type KafkaProducer,
  type KafkaRecord,
  kafkaKeyFor,
  type OutgoingRecord,
  parseAnyDeadLetter,
  parseDeadLetter,
  REPLAY_OF_HEADER,
  type RecordRef,
  type RedisClient,
  type RequestContract,
  type RequestEnvelope,
  replayEnvelope,
  scanTopic,
  taskId,
} from '@requester/shared';

/**
 * `requester dlq list|replay`: reading the dead-letter topic and re-submitting its requests to
 * `in`. How a replay avoids the dedup and gets a fresh retry budget is `replayEnvelope`'s story
 * (`@requester/shared`); this module selects the records and makes each replay happen once.
 *
 * Once per record: a replayed DLQ record is marked in Redis (`<prefix>:dlq-replayed:<topic>/<p>/<o>`,
 * holding the replay's tryCount, kept REPLAY_MARK_TTL_MS), and a second run skips it unless
 * `force` — a forced replay takes a tryCount past the marked one, so it is new to the dedup and
 * really runs again. The mark is set after `in` acknowledged the write, so a crash in between
 * replays it again on the next run — and that copy carries the same task id as the first, which
 * the queue refuses while it remembers it (QUEUE_DEDUP_WINDOW).
 */

export interface DlqFilter {
  requestIds?: ReadonlySet<string>;
  /**
   * DLQ positions (`topic/partition/offset`): only these records (an operator's selection in the
   * UI). A replay then replays the selected record of a request, not its latest.
   */
  refs?: ReadonlySet<string>;
  /** failedAt ≥ sinceMs (epoch ms). */
  sinceMs?: number;
  /** failedAt < untilMs. */
  untilMs?: number;
  /** The target origin of the request (`https://api.x.com:443`, as `originOf` writes it). */
  origin?: string;
  /** The error code of the final result (`timeout`, `circuit_open`…). */
  errorCode?: string;
  /** The client (API key name) that sent the request. */
  client?: string;
  /** The destination the request named (`meta.destination`): a destination's recover. */
  destination?: string;
  /** DLQ positions (`topic/partition/offset`) left out: those an operator marked as handled. */
  exclude?: ReadonlySet<string>;
}

/** A dead letter and where it is on the DLQ topic. */
export interface DlqEntry<R extends AnyDeadLetter = AnyDeadLetter> {
  record: R;
  at: RecordRef;
}

export interface DlqSource {
  kafka: KafkaClient;
  topic: string;
  /** Reads chosen records again by offset (a replay keeps only references while it selects). */
  reader?: Pick<Fetcher, 'fetchMany'>;
  contract?: RequestContract;
  /** Progress and per-record problems (unreadable records), for stderr. */
  onProgress?(read: number, expected: number): void;
  onUnreadable?(at: RecordRef, problem: string): void;
}

export interface ScanCounts {
  read: number;
  unreadable: number;
  matched: number;
  /** DLQ partitions whose end was not reached (see scanTopic). */
  incomplete: number[];
}

/** How long a replayed DLQ record stays marked (a DLQ topic rarely keeps records longer). */
export const REPLAY_MARK_TTL_MS = 30 * 24 * 3600 * 1000;
/** Dead letters read back, and replays produced to `in`, per round of a replay. */
const REPLAY_CHUNK = 500;

export function matches(record: AnyDeadLetter, filter: DlqFilter, at?: RecordRef): boolean {
  const { requestIds, sinceMs, untilMs } = filter;
  if (requestIds && !requestIds.has(deadLetterRequestId(record) ?? '')) return false;
  if ((filter.exclude || filter.refs) && at) {
    const ref = formatRecordRef(at);
    if (filter.exclude?.has(ref) || (filter.refs && !filter.refs.has(ref))) return false;
  }
  if (filter.errorCode !== undefined && record.result.meta.error?.code !== filter.errorCode) return false;
  if (
    filter.client !== undefined &&
    (record.envelope?.meta.client ?? record.result.meta.client) !== filter.client
  )
    return false;
  if (filter.origin !== undefined && deadLetterOrigin(record) !== filter.origin) return false;
  if (filter.destination !== undefined && record.envelope?.meta.destination !== filter.destination)
    return false;
  if (sinceMs === undefined && untilMs === undefined) return true;
  const failedAt = Date.parse(record.failedAt);
  return (sinceMs === undefined || failedAt >= sinceMs) && (untilMs === undefined || failedAt < untilMs);
}

/** The target origin of a dead letter's request; undefined for a record that held no request. */
export function deadLetterOrigin(record: AnyDeadLetter): string | undefined {
  const uri = record.envelope?.request.uri;
  if (!uri) return undefined;
  try {
    return originOf(uri);
  } catch {
    return undefined;
  }
}

/** Scans the DLQ topic once (bounded by its end at the start), handing each matching record on. */
async function scanMatching(
  source: DlqSource,
  filter: DlqFilter,
  onMatch: (entry: DlqEntry) => void,
): Promise<ScanCounts> {
  const counts = { unreadable: 0, matched: 0 };
  const onMessage = (message: KafkaRecord, partition: number) => {
    const at = { topic: source.topic, partition, offset: message.offset };
    let record: AnyDeadLetter;
    try {
      record = parseAnyDeadLetter(message.value, source.contract);
    } catch (err) {
      counts.unreadable++;
      source.onUnreadable?.(at, err instanceof Error ? err.message : String(err));
      return;
    }
    if (!matches(record, filter, at)) return;
    counts.matched++;
    onMatch({ record, at });
  };
  const scan = await scanTopic(source.kafka, source.topic, {
    onMessage,
    onFailed: (message, partition, err) => {
      counts.unreadable++;
      const at = { topic: source.topic, partition, offset: message.offset };
      source.onUnreadable?.(at, err instanceof Error ? err.message : String(err));
    },
    groupPrefix: 'requester-dlq',
    ...(source.onProgress ? { onProgress: source.onProgress } : {}),
  });
  return { read: scan.read, ...counts, incomplete: scan.incomplete };
}

const byFailedAt = (a: DlqEntry, b: DlqEntry) =>
  Date.parse(a.record.failedAt) - Date.parse(b.record.failedAt) || compareRefs(a.at, b.at);

/** The `limit` most recent matching dead letters (by failedAt), oldest first. */
export async function listDeadLetters(
  source: DlqSource,
  filter: DlqFilter,
  limit: number,
): Promise<ScanCounts & { entries: DlqEntry[] }> {
  let kept: DlqEntry[] = [];
  const counts = await scanMatching(source, filter, (entry) => {
    kept.push(entry);
    // Trimmed in rounds, so memory stays O(limit) however long the topic.
    if (kept.length >= 2 * limit + 100) kept = kept.sort(byFailedAt).slice(-limit);
  });
  return { ...counts, entries: limit > 0 ? kept.sort(byFailedAt).slice(-limit) : [] };
}

export interface ReplayOptions {
  filter: DlqFilter;
  /** Most records replayed; undefined = all selected. */
  limit?: number;
  dryRun: boolean;
  /** Replay records already marked as replayed. */
  force: boolean;
}

export interface ReplayTarget {
  producer: KafkaProducer;
  topicIn: string;
  marks: ReplayMarks;
  produceTimeoutMs: number;
  onReplayed?(done: number, total: number): void;
  /** The task journal (`replayed`); absent = none. */
  journal?: Journal;
  /** What re-sends them, as the journal's `replayed` events name it (default `requester dlq replay`). */
  by?: string;
  /**
   * Signs the replays (docs/architecture.md §10): a dead letter was written by Requester about a
   * request it had admitted, so its replay keeps the `meta.client` it had. Asked for only when a
   * replay is written (a dry run needs no PostgreSQL).
   */
  signer: () => Promise<EntrySigner>;
}

export interface ReplayedItem {
  requestId: string;
  /** The queue task id of the replay (`requestId:tryCount`), new to the dedup. */
  taskId: string;
  dlq: string;
}

export interface ReplaySummary extends ScanCounts {
  dryRun: boolean;
  replayed: ReplayedItem[];
  /** `unprocessable`: dead letters of records that held no request (nothing to re-submit). */
  skipped: { alreadyReplayed: number; superseded: number; overLimit: number; unprocessable: number };
}

/** Where a selected dead letter is, and what picking the latest one per request needs. */
interface DlqPointer {
  requestId: string;
  at: RecordRef;
  failedAtMs: number;
  /** The `in` record the request was read from: replays go out in this order. */
  source: RecordRef;
}

const latestFirst = (a: DlqPointer, b: DlqPointer) => a.failedAtMs - b.failedAtMs || compareRefs(a.at, b.at);

/**
 * Replays the selected dead letters: for each request (a client's requestId) only its latest dead
 * letter (an earlier one is superseded: replaying it would repeat a budget already spent), skipping those marked as
 * replayed (unless `force`), in the order their requests first arrived on `in` (so an ordered
 * partition's requests keep their order), at most `limit`. A dry run writes nothing.
 *
 * Memory stays small however long the DLQ: the scan keeps a pointer per request (its position and
 * times, not the record), and the chosen records are read back by offset REPLAY_CHUNK at a time,
 * each chunk produced and marked before the next is read.
 */
export async function replayDeadLetters(
  source: DlqSource & { reader: Pick<Fetcher, 'fetchMany'> },
  target: ReplayTarget,
  options: ReplayOptions,
): Promise<ReplaySummary> {
  const latest = new Map<string, DlqPointer>();
  let superseded = 0;
  let unprocessable = 0;
  const counts = await scanMatching(source, options.filter, ({ record, at }) => {
    if (!record.envelope) {
      unprocessable++;
      return;
    }
    const { requestId, client } = record.envelope.meta;
    const pointer = { requestId, at, failedAtMs: Date.parse(record.failedAt), source: record.source ?? at };
    // Two clients' requests sharing a requestId are two requests (the client namespace).
    const request = clientScoped(client, requestId);
    const seen = latest.get(request);
    if (seen) superseded++;
    if (!seen || latestFirst(seen, pointer) <= 0) latest.set(request, pointer);
  });
  const candidates = [...latest.values()].sort((a, b) => compareRefs(a.source, b.source));
  latest.clear();
  const previous = await target.marks.previousReplays(candidates);
  const eligible = candidates.flatMap((pointer, i) =>
    options.force || previous[i] === undefined ? [{ pointer, previousReplay: previous[i] }] : [],
  );
  const chosen = options.limit === undefined ? eligible : eligible.slice(0, options.limit);
  const skipped = {
    alreadyReplayed: candidates.length - eligible.length,
    superseded,
    overLimit: eligible.length - chosen.length,
    unprocessable,
  };
  const replayed: ReplayedItem[] = [];
  for (let i = 0; i < chosen.length; i += REPLAY_CHUNK) {
    const planned = await readBack(source, chosen.slice(i, i + REPLAY_CHUNK));
    if (!options.dryRun) await writeReplays(planned, target);
    replayed.push(...planned.map(replayedItem));
    if (!options.dryRun) target.onReplayed?.(replayed.length, chosen.length);
  }
  return { ...counts, dryRun: options.dryRun, replayed, skipped };
}

/**
 * Reads chosen dead letters back by offset and plans their replays. One that cannot be read or
 * parsed any more (retention ran out between the scan and now) is reported and left out.
 */
async function readBack(
  source: DlqSource & { reader: Pick<Fetcher, 'fetchMany'> },
  chosen: ReadonlyArray<{ pointer: DlqPointer; previousReplay: number | undefined }>,
): Promise<PlannedReplay[]> {
  const outcomes = await source.reader.fetchMany(chosen.map(({ pointer }) => pointer.at));
  return chosen.flatMap(({ pointer, previousReplay }, i) => {
    const outcome = outcomes[i];
    try {
      if (!outcome?.ok) throw outcome?.error ?? new Error('not read');
      const record = parseDeadLetter(outcome.record.value, source.contract);
      return [plan({ record, at: pointer.at }, previousReplay)];
    } catch (err) {
      source.onUnreadable?.(pointer.at, err instanceof Error ? err.message : String(err));
      return [];
    }
  });
}

/** A dead letter and the envelope its replay writes. */
export interface PlannedReplay {
  entry: DlqEntry<DeadLetter>;
  envelope: RequestEnvelope;
}

/** `previousReplay`: the tryCount of an earlier replay of this record (a forced replay moves past it). */
function plan(entry: DlqEntry<DeadLetter>, previousReplay: number | undefined): PlannedReplay {
  const options = previousReplay === undefined ? {} : { previousReplay };
  return { entry, envelope: replayEnvelope(entry.record, options) };
}

function replayedItem({ entry, envelope }: PlannedReplay): ReplayedItem {
  return {
    requestId: envelope.meta.requestId,
    taskId: taskId(envelope.meta.client, envelope.meta.requestId, envelope.tryCount ?? 0),
    dlq: formatRecordRef(entry.at),
  };
}

/** Produces one chunk of replays to `in`, and marks them once Kafka acknowledged it. */
async function writeReplays(replays: PlannedReplay[], target: ReplayTarget): Promise<void> {
  if (replays.length === 0) return;
  // The replay happens when the record is written: a router may route it before this process
  // gets to journal it, and the journal orders a request's events by their time.
  const at = Date.now();
  const signer = await target.signer();
  const messages = replays.map((replay) => replayMessage(replay, signer));
  await target.producer.send(target.topicIn, messages, target.produceTimeoutMs, { readByOffset: true });
  await target.marks.mark(replays);
  for (const { entry, envelope } of replays) {
    const { requestId, client } = envelope.meta;
    target.journal?.emit({
      type: 'replayed',
      requestId,
      client,
      by: target.by ?? 'requester dlq replay',
      dlq: formatRecordRef(entry.at),
      at,
    });
  }
}

/** The `in` record of a replay: keyed like the ingress does (partition, else requestId), signed. */
export function replayMessage({ entry, envelope }: PlannedReplay, signer: EntrySigner): OutgoingRecord {
  const value = JSON.stringify(envelope);
  const headers = { [REPLAY_OF_HEADER]: formatRecordRef(entry.at) };
  return { key: kafkaKeyFor(envelope), value, headers: signer.signed(value, headers) };
}

/** Which DLQ records were replayed already (Redis keys with a TTL; see the module comment). */
export class ReplayMarks {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly ttlMs: number;

  constructor(redis: RedisClient, prefix: string, ttlMs = REPLAY_MARK_TTL_MS) {
    this.redis = redis;
    this.prefix = prefix;
    this.ttlMs = ttlMs;
  }

  /** Per entry: the tryCount its last replay used, or undefined when it was never replayed. */
  async previousReplays(entries: ReadonlyArray<{ at: RecordRef }>): Promise<Array<number | undefined>> {
    const values = await Promise.all(entries.map((entry) => this.redis.get(this.key(entry))));
    return values.map((value) => (value === null ? undefined : markedTryCount(value)));
  }

  async mark(replays: readonly PlannedReplay[]): Promise<void> {
    const at = new Date().toISOString();
    await Promise.all(
      replays.map(({ entry, envelope }) =>
        this.redis.set(
          this.key(entry),
          JSON.stringify({ tryCount: envelope.tryCount, at }),
          'PX',
          this.ttlMs,
        ),
      ),
    );
  }

  private key(entry: { at: RecordRef }): string {
    return `${this.prefix}:dlq-replayed:${formatRecordRef(entry.at)}`;
  }
}

/** A mark's tryCount; a mark that cannot be read still counts as replayed (0: any forced id is new). */
function markedTryCount(value: string): number {
  try {
    const tryCount = (JSON.parse(value) as { tryCount?: unknown }).tryCount;
    return typeof tryCount === 'number' ? tryCount : 0;
  } catch {
    return 0;
  }
}

function compareRefs(a: RecordRef, b: RecordRef): number {
  if (a.partition !== b.partition) return a.partition - b.partition;
  const diff = BigInt(a.offset) - BigInt(b.offset);
  return diff === 0n ? 0 : diff < 0n ? -1 : 1;
}
