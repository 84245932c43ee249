import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

const ABOUT =
  'One circuit breaker per target origin (scheme://host:port), shared by every executor in Redis: ' +
  'BREAKER_FAILURE_THRESHOLD failures in a row open it for BREAKER_OPEN_DURATION (doubling while ' +
  'probes fail, up to BREAKER_MAX_OPEN_DURATION); then one probe call decides. An origin failing ' +
  'for ORIGIN_FAILING_HOLD_AFTER is held back (held: failing): its tasks wait, not attempted, while ' +
  'one probe per BREAKER_MAX_OPEN_DURATION checks it; one whose receiver answered ' +
  '`webhook-delivery: disable` is held until reset (held: opt_out). reset closes it and ends a hold ' +
  'at once; executors that cached the open state follow within BREAKER_STATE_CACHE.';

/** `requester breakers list|show|reset`: the shared circuit breakers of the target origins. */
export function registerBreakersCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'breakers <action> [origin]',
    'circuit breakers of the target origins: list the open ones, show or reset one',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['list', 'show', 'reset'] as const,
          describe:
            'list: held origins, then the other open and half-open ones; show: the state of one origin; ' +
            'reset: close the breaker of one origin and end its hold (its next call goes through)',
        })
        .positional('origin', {
          type: 'string',
          describe:
            "show, reset: the origin or any URL on it (https://api.x.com means https://api.x.com:443), or 'destination <name>' for a destination's own breaker",
        })
        .option('limit', { type: 'number', default: 1_000, describe: 'list: at most this many origins' })
        .example('$0 breakers list', 'which targets are being refused, and until when')
        .example('$0 breakers reset https://api.partner.example', 'the partner is back: stop waiting')
        .example(
          "$0 breakers reset 'destination partner-billing'",
          'the same, for a destination with a breaker of its own',
        )
        .epilogue(`${ABOUT}\n\n${EXIT_CODES_HELP}`),
    async (argv) => (await import('./run.ts')).breakers(argv, configFrom),
  );
}
