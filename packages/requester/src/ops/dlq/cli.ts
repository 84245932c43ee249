import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson, withReveal } from '../../commands/common.ts';

/**
 * `requester dlq list|replay`: the dead-letter topic (KAFKA_TOPIC_DLQ), read once up to its current
 * end. Its records are dead-lettered *requests* (failed for good); the queue's own dead *tasks* are
 * `requester queue dead` (see queue.ts).
 */
export function registerDlqCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'dlq <action>',
    'dead-lettered requests (failed for good, on the DLQ topic): list, or replay them to in',
    (y) =>
      withReveal(withJson(y))
        .positional('action', {
          choices: ['list', 'replay', 'delete'] as const,
          describe:
            'list: the most recent dead letters; replay: re-submit the selected requests to in ' +
            '(same requestId, a fresh retry budget; each dead letter once unless --force); delete: ' +
            'mark the selected dead letters as handled (the records stay on the topic until its ' +
            'retention; lists with --hide-handled and the operator UI leave them out)',
        })
        .option('request-id', { type: 'string', array: true, describe: 'only these requestIds' })
        .option('since', { type: 'string', describe: 'only dead letters failed at or after (RFC 3339)' })
        .option('until', { type: 'string', describe: 'only dead letters failed before (RFC 3339)' })
        .option('origin', { type: 'string', describe: 'only requests to this origin (or any URL on it)' })
        .option('error-code', { type: 'string', describe: 'only results with this error code (timeout…)' })
        .option('client', { type: 'string', describe: 'only requests of this client (API key name)' })
        .option('destination', {
          type: 'string',
          describe: 'only requests that named this destination (meta.destination)',
        })
        .option('hide-handled', {
          type: 'boolean',
          default: false,
          describe: 'list, replay: leave out dead letters marked as handled (needs PostgreSQL)',
        })
        .option('limit', {
          type: 'number',
          describe: 'list: how many (default 50, the most recent); replay: at most this many',
        })
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'replay: show what would be replayed',
        })
        .option('all', { type: 'boolean', default: false, describe: 'replay: every dead letter (no filter)' })
        .option('force', {
          type: 'boolean',
          default: false,
          describe: 'replay: again those replayed before (under a new task id)',
        })
        .example('$0 dlq list --since 2026-12-01T00:00:00Z', 'what failed since midnight UTC')
        .example('$0 dlq replay --request-id ord-42 --dry-run', 'what a replay of ord-42 would send')
        .example('$0 dlq list --json --limit 500 | jq length', 'JSON: one array of dead letters')
        .epilogue(
          'A dead letter is a request that failed for good (retries exhausted or a permanent error): its ' +
            'final result is on out and a record on KAFKA_TOPIC_DLQ. Tasks the Redis queue itself gave up ' +
            'on are something else: `requester queue dead`.\n\n' +
            EXIT_CODES_HELP,
        ),
    async (argv) => (await import('./run.ts')).dlq(argv, configFrom),
  );
}
