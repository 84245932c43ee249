import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson, withReveal } from '../../commands/common.ts';

/** The queue's commands, by the name of their implementation in ./run.ts. */
export type QueueAction =
  | 'info'
  | 'verify'
  | 'purge'
  | 'deadList'
  | 'deadRetry'
  | 'deadPurge'
  | 'dlq'
  | 'retry';

/**
 * `requester queue info|verify|purge` and `requester queue dead list|retry|purge`: the operator's
 * view of the Redis fair queue.
 *
 * Vocabulary: a *dead task* is one the queue itself gave up on (a payload that is not a task; a
 * lease that kept expiring, where maxDeliveries is set): it sits in the queue's dead set in Redis, see `queue dead`. A
 * *dead-lettered request* failed for good (retries exhausted, permanent error): it is a record on the
 * DLQ topic, see `requester dlq`. The old names `queue dlq` and `queue retry` (and `purge
 * --dead-only`) still work, hidden, with a deprecation notice on stderr.
 */
const DEAD_TASKS =
  'Dead tasks are tasks the queue itself gave up on (a payload that is not a task; or, with ' +
  'maxDeliveries set, a lease that kept expiring); they wait in the queue in Redis until retried ' +
  'or purged. Requests that failed for good are not here: they are dead letters on the DLQ topic ' +
  '(`requester dlq`).';

export function registerQueueCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  // Each command's implementation is imported when it runs (./run.ts): --help loads no client.
  const run = (action: QueueAction) => async (argv: Record<string, unknown>) =>
    (await import('./run.ts')).queue(action, argv, configFrom);
  cli.command('queue <command>', 'inspect and maintain the Redis fair queue (and its dead tasks)', (y) =>
    y
      .command(
        'info',
        'depth per shard and in total, oldest waiting task',
        (q) =>
          withJson(q)
            .option('by-client', {
              type: 'boolean',
              default: false,
              describe:
                'per client instead: pending tasks, ready partitions, weight, cap and tasks in flight (capped clients), and how long its next task has waited, largest backlog first',
            })
            .example('$0 queue info', 'totals, then the shards that hold anything')
            .example('$0 queue info --by-client', 'who holds the backlog, and who waits')
            .example('$0 queue info --json | jq .totals.pending', 'tasks waiting, for a script')
            .epilogue(EXIT_CODES_HELP),
        run('info'),
      )
      .command(
        'verify',
        'full consistency check of every shard (O(tasks): troubleshooting, not a busy queue); exit 1 on a violation',
        (q) => withJson(q).example('$0 queue verify', '').epilogue(EXIT_CODES_HELP),
        run('verify'),
      )
      .command(
        'purge',
        'delete every task of the queue (needs --yes); dead tasks only: `queue dead purge`',
        (q) =>
          withJson(q)
            .option('yes', { type: 'boolean', default: false, describe: 'confirm the deletion' })
            .option('dead-only', { type: 'boolean', default: false, hidden: true })
            .example('$0 queue purge --yes', 'empty the queue (tests, a broken environment)')
            .epilogue(EXIT_CODES_HELP),
        run('purge'),
      )
      .command('dead <command>', "the queue's dead tasks: list, retry, purge", (d) =>
        d
          .command(
            'list',
            'the most recent dead tasks, newest first',
            (q) =>
              withReveal(withJson(q))
                .option('limit', { type: 'number', default: 50, describe: 'how many' })
                .example('$0 queue dead list --limit 10', '')
                .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
            run('deadList'),
          )
          .command(
            'retry [ids..]',
            'put dead tasks back into their partitions as new arrivals',
            (q) =>
              retryOptions(withJson(q))
                .example('$0 queue dead retry ord-42:1', 'one task (id requestId:tryCount)')
                .example('$0 queue dead retry --all', 'every dead task')
                .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
            run('deadRetry'),
          )
          .command(
            'purge',
            'delete every dead task (needs --yes); their ids stay refused for the dedup window',
            (q) =>
              withJson(q)
                .option('yes', { type: 'boolean', default: false, describe: 'confirm the deletion' })
                .example('$0 queue dead purge --yes', '')
                .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
            run('deadPurge'),
          )
          .demandCommand(1, 'queue dead: give list, retry or purge')
          .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
      )
      // Deprecated names, hidden from --help (description false): they said "dlq" for dead tasks.
      .command(
        'dlq',
        false,
        (q) => withReveal(withJson(q)).option('limit', { type: 'number', default: 50 }),
        run('dlq'),
      )
      .command('retry [ids..]', false, (q) => retryOptions(withJson(q)), run('retry'))
      .demandCommand(1, 'queue: give info, verify, purge or dead')
      .example('$0 queue info', 'how deep the queue is')
      .example('$0 queue dead list', 'tasks the queue gave up on')
      .epilogue(`${DEAD_TASKS}\n\n${EXIT_CODES_HELP}`),
  );
}

function retryOptions<T>(y: Argv<T>) {
  return y
    .positional('ids', { type: 'string', array: true, describe: 'task ids (requestId:tryCount)' })
    .option('all', { type: 'boolean', default: false, describe: 'every dead task' });
}
