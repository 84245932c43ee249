import type { Argv } from 'yargs';
import type { ConfigFrom } from '../../commands/common.ts';

/**
 * `requester trace <requestId>`: what happened to one request, from the task journal
 * (KAFKA_TOPIC_EVENTS), in order, with times relative to its first event. One partition of the
 * journal is read from `--since` on (default: the last hour), see readJournal.
 */
export function registerTraceCommand<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'trace <requestId>',
    'print what happened to one request (the task journal)',
    (y) =>
      y
        .positional('requestId', { type: 'string', demandOption: true, describe: 'the request to trace' })
        .option('since', {
          type: 'string',
          default: '1h',
          describe: 'read the journal from this far back (duration, e.g. 6h) or this RFC 3339 time',
        })
        .option('client', {
          type: 'string',
          describe:
            "only this client's request (requestIds are per client: without it, the events of every client's request of that id)",
        })
        .option('json', { type: 'boolean', default: false, describe: 'print the events as JSON' })
        .example('$0 trace 7d6f0c1e-… --since 24h', 'the story of one request of the last day')
        .example('$0 trace ord-42 --client billing', 'the story of the request ord-42 of the client billing'),
    async (argv) => (await import('./run.ts')).trace(argv, configFrom),
  );
}
