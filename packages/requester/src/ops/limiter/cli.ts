import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

const ABOUT =
  "A limiter key is a request's meta.limiter.key, and it is its client's own: give the client (the API " +
  'key name, meta.client) with --client, unless SHARED_LIMITER_KEYS declares the key one quota for every ' +
  'caller. Its state lives in Redis per algorithm and window ' +
  "duration. Redis does not hold the windows' values (each request carries them): give them with " +
  '--rate to see used/remaining; without, counts and reset times only (buckets show when they are ' +
  'full again). The reset is when the window has forgotten every call counted now. A calendar quota ' +
  '(meta.limiter.quota) shows as calendar-quota, its window the period (month from day 15 (UTC)), its ' +
  'reset the end of the period; give its value with --quota.';

/** `requester limiter show <key>`: the current windows of one rate-limiter key. */
export function registerLimiterCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command('limiter <command>', 'rate limiters: show the windows of a key', (l) =>
    l
      .command(
        'show <key>',
        'the current windows of a rate-limiter key: used, remaining, reset time',
        (y) =>
          withJson(y)
            .positional('key', {
              type: 'string',
              demandOption: true,
              describe: 'the limiter key (meta.limiter.key)',
            })
            .option('client', {
              type: 'string',
              describe:
                "whose key: the client's name (meta.client, an API key's name); none for requests without a client and for shared keys",
            })
            .option('rate', {
              type: 'string',
              array: true,
              describe: 'the windows as the requests give them, <value>/<duration>: 100/1s, 5000/1h, 10/s',
            })
            .option('quota', {
              type: 'string',
              describe:
                "the calendar quota's value as the requests give it (meta.limiter.quota.value): used/remaining of the quota",
            })
            .option('api-key', {
              type: 'boolean',
              default: false,
              describe: 'the key is an API key id: its per-key rate of the HTTP API (keys create --rate)',
            })
            .example(
              '$0 limiter show partner-api --client billing --rate 100/1s --rate 5000/1h',
              'used and remaining per window of the key partner-api of the client billing',
            )
            .example(
              '$0 limiter show partner-api --client billing --quota 1000000',
              'units spent and left of its calendar quota, and when it resets',
            )
            .example('$0 limiter show partner-api --json', 'the raw view, as JSON')
            .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
        async (argv) => (await import('./run.ts')).show(argv, configFrom),
      )
      .demandCommand(1, 'limiter: give show')
      .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
  );
}
