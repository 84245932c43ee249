/**
 * The writes of a routed batch: tasks to the queue, rows to the outbox, answers (error results and
 * dead letters) for the records neither takes.
 *
 * @module
 */

import { errorResult, type UnprocessableAnswer, unprocessableAnswer } from '@requester/shared/contract';
import { asRequesterError, isOutage } from '@requester/shared/errors';
import type { KafkaProducer } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import type { Outbox, OutboxRow } from '@requester/shared/outbox';
import type { QueueTask, Route, SourceRecord } from './route.ts';

const routed = counter('router_records_total', 'records of in routed, by destination', ['destination']);
const refused = counter(
  'router_refused_total',
  'records of in the queue or outbox refused (answered with an error result and dead-lettered)',
  ['destination'],
);

/** Where routed tasks go: the Redis queue (FairQueue.publish satisfies this). */
export interface TaskSink {
  publish(tasks: QueueTask[]): Promise<unknown>;
}

export interface RouteWriterOptions {
  queue: TaskSink;
  outbox: Outbox;
  producer: KafkaProducer;
  topicOut: string;
  /** Dead letters of unprocessable records go here; none are written without it. */
  topicDlq?: string;
  produceTimeoutMs: number;
  logger: Logger;
}

export class RouteWriter {
  private readonly options: RouteWriterOptions;

  constructor(options: RouteWriterOptions) {
    this.options = options;
  }

  /**
   * The batch's writes together (one pipelined queue publish, one outbox insert, one produce of
   * error results); a batch the queue or outbox refuses is written again record by record.
   */
  async write(routes: Array<{ record: SourceRecord; route: Route }>): Promise<void> {
    const tasks: QueueTask[] = [];
    const rows: OutboxRow[] = [];
    const answers = new Map<SourceRecord, UnprocessableAnswer>();
    for (const { record, route } of routes) {
      if (route.kind === 'queue') tasks.push(route.task);
      else if (route.kind === 'outbox') rows.push(route.row);
      else answers.set(record, this.answerInvalid(record, route));
    }
    try {
      await Promise.all([
        tasks.length > 0 ? this.options.queue.publish(tasks) : undefined,
        rows.length > 0 ? this.options.outbox.add(rows) : undefined,
      ]);
    } catch (err) {
      if (isOutage(err)) throw err;
      this.options.logger.warn(
        { err },
        'the queue or outbox refused a batch of in: writing it record by record',
      );
      await this.writeOneByOne(routes, answers);
      return;
    }
    await this.answer([...answers.values()]);
    routed.inc({ destination: 'queue' }, tasks.length);
    routed.inc({ destination: 'outbox' }, rows.length);
    routed.inc({ destination: 'invalid' }, answers.size);
  }

  /**
   * After a batch was refused: each record on its own, in offset order, so the ones refused are
   * answered and the others written. An outage on the way fails the batch (writes are idempotent).
   */
  private async writeOneByOne(
    routes: Array<{ record: SourceRecord; route: Route }>,
    invalid: Map<SourceRecord, UnprocessableAnswer>,
  ): Promise<void> {
    const answers: UnprocessableAnswer[] = [];
    for (const { record, route } of routes) {
      const answered = invalid.get(record);
      if (answered) answers.push(answered);
      if (route.kind === 'invalid') continue;
      try {
        if (route.kind === 'queue') await this.options.queue.publish([route.task]);
        else await this.options.outbox.add([route.row]);
        routed.inc({ destination: route.kind });
      } catch (err) {
        if (isOutage(err)) throw err;
        refused.inc({ destination: route.kind });
        answers.push(this.answerRefused(record, route, err));
      }
    }
    await this.answer(answers);
    routed.inc({ destination: 'invalid' }, invalid.size);
  }

  /** Error results to `out`, dead letters to the DLQ. */
  private async answer(answers: UnprocessableAnswer[]): Promise<void> {
    const { producer, topicOut, topicDlq, produceTimeoutMs } = this.options;
    await Promise.all([
      producer.send(
        topicOut,
        answers.map((a) => a.result),
        produceTimeoutMs,
      ),
      topicDlq
        ? producer.send(
            topicDlq,
            answers.map((a) => a.deadLetter),
            produceTimeoutMs,
          )
        : undefined,
    ]);
  }

  /** An invalid record is answered on `out` (keyed by its requestId when readable), never dropped. */
  private answerInvalid(
    record: SourceRecord,
    { result }: Extract<Route, { kind: 'invalid' }>,
  ): UnprocessableAnswer {
    this.options.logger.warn(
      {
        requestId: result.meta.requestId,
        partition: record.partition,
        offset: record.offset,
        problem: result.meta.error?.message,
      },
      'invalid record on in: answered with an error result',
    );
    return unprocessableAnswer(record, result);
  }

  /** A valid request the queue or outbox refused: answered with the refusal, as an error result. */
  private answerRefused(
    record: SourceRecord,
    route: Extract<Route, { kind: 'queue' | 'outbox' }>,
    err: unknown,
  ): UnprocessableAnswer {
    const { envelope } = route;
    const { requestId, proxyData } = envelope.meta;
    const refusal = asRequesterError(err);
    const where = route.kind === 'queue' ? 'the queue' : 'the outbox';
    this.options.logger.error(
      { err, requestId, partition: record.partition, offset: record.offset },
      `${where} refused a request of in: answered with an error result and dead-lettered`,
    );
    const code = refusal.code === 'payload_too_large' ? 'payload_too_large' : 'invalid_request';
    const message = `${where} refused the request: ${refusal.message}`;
    const result = errorResult(requestId, code, message, { tryCount: envelope.tryCount ?? 0, proxyData });
    return unprocessableAnswer(record, result, envelope);
  }
}
