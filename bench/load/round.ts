/** One round of load against one side: requests sent over HTTP or Kafka, their results awaited. */
import { randomBytes } from 'node:crypto';
import * as hdr from 'hdr-histogram-js';
import { Pool } from 'undici';
import { cpuOf, readBytesOf } from './process-stats.ts';
import type { Side } from './processes.ts';
import type { Tracker } from './results.ts';
import {
  args,
  batchBytes,
  bodyBytes,
  connections,
  count,
  kafka,
  limitMs,
  mode,
  PlainKafka,
  pipeline,
  targetPath,
} from './settings.ts';

export function bodyOf(id: string, targetUrl: string, sync: boolean): string {
  const body = 'x'.repeat(bodyBytes);
  return JSON.stringify({
    request: args.wake ? { uri: '', body } : { uri: `${targetUrl}${targetPath}`, method: 'POST', body },
    meta: { requestId: id, ...(sync ? { sync: true } : {}) },
  });
}

export interface RoundResult {
  side: string;
  sent: number;
  accepted: number;
  completed: number;
  errors: number;
  acceptedPerSec: number;
  completedPerSec: number;
  latency: hdr.Histogram;
  /** sync: the HTTP round trip per call. */
  rtt?: hdr.Histogram;
  cpu: Record<string, number>;
  /** Bytes Requester read (rchar) during the round. */
  readBytes: number;
  /** Seconds between the CPU and read samples that frame the round. */
  seconds: number;
  timedOut: boolean;
  /** --profile-rounds: what the round's profiles say. */
  profile?: RoundProfile;
}

export interface RoundProfile {
  file: string;
  allocatedPerTask: number;
  busyPerTask: number;
  httpShare: number;
  gcShare: number;
  withoutHttpPerTask: number;
}

export const newHistogram = () =>
  hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 600_000_000,
    numberOfSignificantValueDigits: 3,
  });

export async function round(
  side: Side,
  n: number,
  target: { url: string; pid: number },
  pids: Record<string, number | undefined>,
): Promise<RoundResult> {
  const prefix = `${side.label}-r${n}-${randomBytes(2).toString('hex')}-`;
  const tracker: Tracker = { prefix, sentAt: new Map(), histogram: newHistogram(), done: 0, lastAt: 0 };
  side.results.current = tracker;
  const allDone = new Promise<void>((resolve) => {
    tracker.onDone = resolve;
  });
  const readBefore = readBytesOf(side.pid);
  const cpuBefore = Object.fromEntries(
    Object.entries(pids).map(([k, pid]) => [k, pid ? cpuOf(k, pid) : Number.NaN]),
  );
  const deadline = performance.now() + limitMs;
  const start = performance.now();
  let accepted = 0;
  let errors = 0;
  let firstAccept = Number.POSITIVE_INFINITY;
  let lastAccept = 0;
  const rtt = newHistogram();

  if (mode === 'kafka' && args.producer === 'kafkajs') {
    const sent = await produceAsOutsider(side, target.url, prefix, tracker, deadline);
    firstAccept = sent.firstAccept;
    lastAccept = sent.lastAccept;
    accepted = sent.accepted;
  } else if (mode === 'kafka') {
    const producer = kafka.producer();
    await producer.connect();
    const batch = 100;
    let next = 0;
    const loop = async () => {
      while (next < count && performance.now() < deadline) {
        const from = next;
        next = Math.min(count, next + batch);
        const records = [];
        const createdAt = new Date().toISOString();
        for (let i = from; i < next; i++) {
          const id = `${prefix}${i}`;
          tracker.sentAt.set(id, performance.now());
          const value = JSON.parse(bodyOf(id, target.url, false));
          records.push({ key: id, value: JSON.stringify({ ...value, createdAt }) });
        }
        const t0 = performance.now();
        await producer.send(side.env.KAFKA_TOPIC_IN as string, records, 30_000);
        firstAccept = Math.min(firstAccept, t0);
        lastAccept = performance.now();
        accepted += records.length;
      }
    };
    await Promise.all(Array.from({ length: 8 }, loop));
    await producer.disconnect();
  } else {
    const sync = mode === 'sync';
    let next = 0;
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${side.token}` };
    const loop = async () => {
      while (next < count && performance.now() < deadline) {
        const id = `${prefix}${next++}`;
        const t0 = performance.now();
        tracker.sentAt.set(id, t0);
        try {
          const res = await side.pool.request({
            path: '/request',
            method: 'POST',
            headers,
            body: bodyOf(id, target.url, sync),
          });
          await res.body.dump();
          const t1 = performance.now();
          if (res.statusCode === (sync ? 200 : 202)) {
            accepted++;
            firstAccept = Math.min(firstAccept, t0);
            lastAccept = t1;
            rtt.recordValue(Math.max(1, Math.round((t1 - t0) * 1000)));
          } else {
            errors++;
            tracker.sentAt.delete(id);
          }
        } catch {
          errors++;
          tracker.sentAt.delete(id);
        }
      }
    };
    await Promise.all(Array.from({ length: connections }, loop));
  }
  const sent = tracker.sentAt.size;
  // Nothing reads `in` without the router and executor: results are not waited for.
  if (tracker.done < sent && pipeline) {
    const remaining = deadline - performance.now();
    await Promise.race([allDone, new Promise((resolve) => setTimeout(resolve, Math.max(remaining, 5_000)))]);
  }
  side.results.current = undefined;
  const readBytes = readBytesOf(side.pid) - readBefore;
  const seconds = (performance.now() - start) / 1000;
  const cpu = Object.fromEntries(
    Object.entries(pids).map(([k, pid]) => [k, pid ? cpuOf(k, pid) - (cpuBefore[k] as number) : Number.NaN]),
  );
  const acceptSpan = (lastAccept - (Number.isFinite(firstAccept) ? firstAccept : start)) / 1000;
  const completeSpan =
    ((tracker.lastAt || performance.now()) - (Number.isFinite(firstAccept) ? firstAccept : start)) / 1000;
  return {
    side: side.label,
    sent,
    accepted,
    completed: tracker.done,
    errors,
    acceptedPerSec: accepted / acceptSpan,
    completedPerSec: tracker.done / completeSpan,
    latency: tracker.histogram,
    ...(mode === 'sync' ? { rtt } : {}),
    cpu,
    readBytes,
    seconds,
    timedOut: tracker.done < sent,
  };
}

/**
 * Writes the round's records to `in` as a producer outside Requester does: a plain kafkajs
 * producer (its default partitioner; acks from all replicas), not Requester's writer, which keeps a
 * big record's batch small. Sends of 100 keyed records (one record batch per partition each), or
 * with --batch-bytes sends of one partition's records up to that many bytes (round-robin).
 */
async function produceAsOutsider(
  side: Side,
  targetUrl: string,
  prefix: string,
  tracker: Tracker,
  deadline: number,
): Promise<{ firstAccept: number; lastAccept: number; accepted: number }> {
  const topic = side.env.KAFKA_TOPIC_IN as string;
  const client = new PlainKafka({
    clientId: 'bench-outsider',
    brokers: args.brokers.split(','),
    logLevel: 0,
  });
  const producer = client.producer();
  await producer.connect();
  const admin = client.admin();
  await admin.connect();
  const partitions = (await admin.fetchTopicOffsets(topic)).length;
  await admin.disconnect();
  const perSend = batchBytes > 0 ? Math.max(1, Math.floor(batchBytes / (bodyBytes + 400))) : 100;
  let next = 0;
  let sends = 0;
  let firstAccept = Number.POSITIVE_INFINITY;
  let lastAccept = 0;
  let accepted = 0;
  const loop = async () => {
    while (next < count && performance.now() < deadline) {
      const from = next;
      next = Math.min(count, next + perSend);
      const partition = batchBytes > 0 ? sends++ % partitions : undefined;
      const createdAt = new Date().toISOString();
      const messages = [];
      for (let i = from; i < next; i++) {
        const id = `${prefix}${i}`;
        tracker.sentAt.set(id, performance.now());
        const value = JSON.parse(bodyOf(id, targetUrl, false));
        messages.push({ key: id, value: JSON.stringify({ ...value, createdAt }), partition });
      }
      const t0 = performance.now();
      await producer.send({ topic, messages });
      firstAccept = Math.min(firstAccept, t0);
      lastAccept = performance.now();
      accepted += messages.length;
    }
  };
  await Promise.all(Array.from({ length: 8 }, loop));
  await producer.disconnect();
  return { firstAccept, lastAccept, accepted };
}

/** The target's own latency at the same concurrency (what sync overhead is measured against). */
export async function targetLatency(target: { url: string }, n: number): Promise<hdr.Histogram> {
  const pool = new Pool(target.url, { connections, pipelining: 1 });
  const histogram = newHistogram();
  let next = 0;
  const loop = async () => {
    while (next++ < n) {
      const t0 = performance.now();
      const res = await pool.request({ path: targetPath, method: 'POST', body: 'x'.repeat(bodyBytes) });
      await res.body.dump();
      histogram.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  await pool.close();
  return histogram;
}
