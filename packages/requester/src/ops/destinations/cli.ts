import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

/**
 * `requester destinations create|update|list|show|delete`: partner APIs defined once by operators
 * (PostgreSQL, DATABASE_URL), which requests name in `meta.destination` with a relative URI. Each
 * create or update is a new version; executors and ingresses use it within CREDENTIALS_CACHE_TTL.
 */
export function registerDestinationsCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'destinations <action> [name]',
    'destinations (a partner API: base URL, headers, credential, rate limit, retries, breaker, pacing): create, update, list, show, status, history, delete, recover',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['create', 'update', 'list', 'show', 'status', 'history', 'delete', 'recover'] as const,
          describe:
            'create: a new destination (version 1); update: a new version, the options given laid over ' +
            'the current one; list: the live destinations at their current version; show: one, with every ' +
            "version; status: how it is doing (its origin's breaker, calls in flight, pace, pause, the calls of the " +
            'last minutes; its quota now); history: its operator actions from the journal (who created, updated, paused, ' +
            'recovered or deleted it, and the version made; --since, default the last hour); ' +
            'delete: its requests are refused from then on; recover: re-send to in the requests to ' +
            'it that failed for good (its dead letters: every final non-2xx answer and transport error) within ' +
            '--since/--until, each once (see dlq replay)',
        })
        .positional('name', { type: 'string', describe: 'the destination name (meta.destination)' })
        .option('from-file', {
          type: 'string',
          requiresArg: true,
          describe:
            'create, update: the spec as JSON ({baseUrl, headers, credentials, limiter (with a calendar quota: limiter.quota), retry, maxConcurrency, timeout, maxBodyBytes, deadline, breaker {failureThreshold, openDuration, maxOpenDuration}, pacing}; - = stdin); the options below go over it',
        })
        .option('base-url', {
          type: 'string',
          describe: 'scheme://host[:port][/path prefix] every call starts with (create: required)',
        })
        .option('header', {
          type: 'string',
          array: true,
          describe: "a static header, 'Name: value' (repeatable); sent over the caller's header of that name",
        })
        .option('secret-header-file', {
          type: 'string',
          requiresArg: true,
          describe:
            "create, update: a file of secret headers, 'Name: value' a line (- = stdin): sealed under CREDENTIALS_MASTER_KEY, sent by the executors, never shown; update: replaces them (an empty file drops them)",
        })
        .option('credentials', {
          type: 'string',
          describe:
            'the credential every call carries (requester credentials list); it must be bound to the base URL origin',
        })
        .option('rate', {
          type: 'string',
          array: true,
          describe:
            "the destination's rate limit, one quota for every caller: calls/window (5/1s, 100/m; repeatable)",
        })
        .option('algorithm', {
          choices: [
            'token-bucket',
            'leaky-bucket',
            'fixed-window-counter',
            'sliding-window-log',
            'sliding-window-counter',
          ] as const,
          describe: 'the limiter algorithm of --rate (default token-bucket)',
        })
        .option('retry-max', {
          type: 'number',
          describe: 'attempts in total, the first included (no retry policy: 1)',
        })
        .option('retry-delay', { type: 'string', describe: 'pause before the first retry (default 1s)' })
        .option('retry-max-delay', {
          type: 'string',
          describe: 'longest pause between attempts (default 5m)',
        })
        .option('max-concurrency', {
          type: 'number',
          describe:
            "most calls in flight to it, every caller and executor together (a caller's meta.concurrency gives way)",
        })
        .option('timeout', {
          type: 'string',
          describe:
            'attempt timeout of its calls (2s, 500ms); a caller may ask for a shorter one, never longer',
        })
        .option('max-body-bytes', { type: 'number', describe: 'largest request body the destination takes' })
        .option('breaker-threshold', {
          type: 'number',
          describe:
            "a breaker of its own, apart from its origin's: consecutive failures that open it (default BREAKER_FAILURE_THRESHOLD); an update giving a --breaker-* option replaces the breaker settings as a whole",
        })
        .option('breaker-open', {
          type: 'string',
          describe:
            'its own breaker: how long it stays open before a probe (30s; default BREAKER_OPEN_DURATION)',
        })
        .option('breaker-max-open', {
          type: 'string',
          describe:
            'its own breaker: the longest open period while probes fail (5m; default BREAKER_MAX_OPEN_DURATION)',
        })
        .option('pacing', {
          choices: ['on', 'off'] as const,
          describe:
            "whether its calls follow the origin's pacing (Retry-After and RateLimit holds, the learnt concurrency) and teach it (default on)",
        })
        .option('since', {
          type: 'string',
          describe:
            'recover: the requests that failed at or after this instant (RFC 3339; required); history: read the journal from this far back (duration, e.g. 720h, or RFC 3339; default 1h)',
        })
        .option('until', { type: 'string', describe: 'recover: … and before this instant (RFC 3339)' })
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'recover: count and list what would be re-sent, send nothing',
        })
        .option('force', {
          type: 'boolean',
          default: false,
          describe: 'recover: again those replayed or recovered before',
        })
        .option('deadline', {
          type: 'string',
          describe:
            "the default start-by deadline of its requests that give no meta.deadline, a duration counted from when each is first due (5m); with an API key's default, the earlier wins",
        })
        .example(
          "$0 destinations create partner-billing --base-url https://api.partner.example/v2 --credentials partner-billing --rate 50/1s --retry-max 5 --header 'X-Partner-Account: 1234'",
          'requests then name meta.destination partner-billing and a relative uri (/invoices?x=1)',
        )
        .example(
          '$0 destinations update partner-billing --rate 20/1s',
          'version 2: a lower rate, the rest kept',
        )
        .example('$0 destinations show partner-billing --json', 'the current version and the history')
        .example(
          '$0 destinations history partner-billing --since 168h',
          'who changed it in the last week: each create, update (the version made), pause, resume, recover, delete',
        )
        .example(
          '$0 destinations recover partner-billing --since 2026-12-06T09:00:00Z --until 2026-12-06T10:30:00Z --dry-run',
          'how many requests to partner-billing failed for good during an outage (then again without --dry-run)',
        )
        .epilogue(EXIT_CODES_HELP),
    async (argv) => (await import('./run.ts')).destinations(argv, configFrom),
  );
}
