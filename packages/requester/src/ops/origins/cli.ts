import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

const ABOUT =
  'A target origin (scheme://host:port) as every executor shares it in Redis: its circuit breaker, ' +
  'calls in flight against MAX_WORKERS_PER_ORIGIN (deployment-wide with ORIGIN_CONCURRENCY_SCOPE=cluster), ' +
  'its pace and learnt concurrency limit, its pause, and its calls of the last 15 minutes ' +
  '(attempts, success rate, p50/p95 latency: the executors flush their counts every 5 s). ' +
  'Listed: origins called within 2 hours, with an open breaker, or paused.';

/** `requester origins list|show <origin>`. */
export function registerOriginsCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'origins [action] [origin]',
    'target origins across the deployment: breaker, in flight, pace, pause, calls and latency',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['list', 'show'] as const,
          default: 'list' as const,
          describe: 'list: every origin known; show: one origin',
        })
        .positional('origin', { type: 'string', describe: 'show: the origin or any URL on it' })
        .option('limit', { type: 'number', default: 200, describe: 'list: at most this many origins' })
        .example('$0 origins', 'every target: state and latency')
        .example('$0 origins show https://api.partner.example --json', 'one origin, as JSON')
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => (await import('./run.ts')).origins(argv, configFrom),
  );
}
