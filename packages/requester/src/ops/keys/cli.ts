import { ADMIN_SCOPES } from '@requester/ingress/keys';
import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

/**
 * `requester keys create|list|revoke|rotate|update`: the API keys of the HTTP API, in PostgreSQL
 * (DATABASE_URL; the database and its migrations are applied first, as the roles do). A token is
 * printed once, alone on stdout (`TOKEN=$(requester keys create --name x)`), and never again.
 */
export function registerKeysCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'keys <action> [key]',
    'API keys of the HTTP API: create, list, revoke, rotate, update, token',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['create', 'list', 'revoke', 'rotate', 'update', 'token'] as const,
          describe:
            'create: a new key (printed once); list: the live keys; revoke: refuse a key from now on ' +
            '(within AUTH_CACHE_TTL); rotate: a new secret, the old one valid for --grace; ' +
            'update: allow or withdraw Kafka entry (--kafka-entry, --no-kafka-entry) or virtual hosts ' +
            '(--virtual-hosts, --no-virtual-hosts), set the --weight or ' +
            'the --max-in-flight; ' +
            'token: a fresh token for BOOTSTRAP_ADMIN_KEY, stored nowhere (no database needed)',
        })
        .positional('key', { type: 'string', describe: 'revoke, rotate, update: the key id or name' })
        .option('name', { type: 'string', describe: 'create: the client name (meta.client of its requests)' })
        .option('hosts', {
          type: 'string',
          describe:
            "create: allowed target hosts, comma-separated, each with an optional :port ('*.partner.example,api.x.com:8443'; " +
            'without a port, any port); default any',
        })
        .option('rate', { type: 'string', describe: 'create: requests per window, e.g. 200/s, 1000/10m' })
        .option('sync', {
          type: 'boolean',
          default: false,
          describe: 'create: may wait for results: sync calls and long-polls (GET /requests/{id}?wait=)',
        })
        .option('schedule', {
          type: 'boolean',
          default: false,
          describe:
            'create: may park tasks beyond REDIS_HORIZON (the outbox): scheduling, retry pauses, limiter waits; ' +
            'without it they are refused or capped at REDIS_HORIZON',
        })
        .option('max-body-bytes', {
          type: 'number',
          describe: 'create: largest request envelope (default MAX_BODY_BYTES)',
        })
        .option('admin', {
          choices: ADMIN_SCOPES,
          describe:
            'create: may use the admin API and operator UI of the admin port (/ui): read sees, write also acts',
        })
        .option('kafka-entry', {
          type: 'boolean',
          describe:
            'create, update: records written straight to Kafka in may claim this key as meta.client ' +
            '(whoever the broker lets write in may then act as this client; its HTTP scopes do not ' +
            'apply there); update: --no-kafka-entry withdraws it (within AUTH_CACHE_TTL)',
        })
        .option('virtual-hosts', {
          type: 'boolean',
          describe:
            "create, update: its callers may send a Host header naming another host than the URI's " +
            '(virtual hosts behind one address); without it such a request is refused (400). ' +
            'update: --no-virtual-hosts withdraws it',
        })
        .option('credentials', {
          type: 'string',
          describe:
            'create: target credentials its requests may name in meta.credentials, comma-separated ' +
            '(requester credentials list); default none',
        })
        .option('destinations', {
          type: 'string',
          describe:
            'create, update: the destinations its requests may name in meta.destination, comma-separated ' +
            '(requester destinations list); a key limited so calls nothing else, no absolute URI. ' +
            "update: --destinations '' lifts the limit. Default: any destination, and absolute URIs",
        })
        .option('weight', {
          type: 'number',
          describe:
            "create, update: the client's share of the workers relative to other clients' (1-1000, " +
            'default 1): under saturation a weight-3 client gets 3 tasks leased for each of a weight-1 one',
        })
        .option('max-in-flight', {
          type: 'number',
          describe:
            'create, update: the most of its tasks in flight at once across every executor (0 = no cap, ' +
            'the default); a client at its cap waits, the others go on. Set it for a client whose targets ' +
            'must not see more than N calls at once',
        })
        .option('deadline', {
          type: 'string',
          describe:
            'create, update: the default start-by deadline of its requests that give no meta.deadline, a ' +
            'duration counted from when each is first due (5m); a task not started by then ends expired. ' +
            "update: --deadline '' removes it. With a destination's default, the earlier wins",
        })
        .option('grace', {
          type: 'string',
          default: '24h',
          describe: 'rotate: how long the old secret keeps working',
        })
        .option('all', { type: 'boolean', default: false, describe: 'list: revoked keys too' })
        .example("$0 keys create --name billing --hosts '*.partner.example' --rate 200/s --sync", '')
        .example('$0 keys create --name ops-alice --admin write', 'an operator: the /ui of the admin port')
        .example('$0 keys rotate billing --grace 1h', '')
        .example('$0 keys update bulk-mailer --weight 1', 'the nightly bulk sender: one share')
        .example('$0 keys update checkout --weight 3', 'three shares when both wait for workers')
        .example('$0 keys update reports --max-in-flight 2', 'never more than 2 of its calls at once')
        .example('$0 keys update quotes --deadline 30s', 'its requests are not worth starting after 30 s')
        .example('$0 keys create --name billing --destinations partner-billing', 'calls partner-billing only')
        .example('$0 keys update billing --kafka-entry', 'producers writing in may claim meta.client billing')
        .example('TOKEN=$($0 keys create --name ci)', 'the token alone on stdout')
        .example('$0 keys create --name ci --json', '{id, name, token} as JSON')
        .example(
          'kubectl create secret generic requester-bootstrap --from-literal=BOOTSTRAP_ADMIN_KEY=$($0 keys token)',
          'the first admin key, created by `requester migrate` (README, Deploy)',
        )
        .epilogue(EXIT_CODES_HELP),
    async (argv) => (await import('./run.ts')).keys(argv, configFrom),
  );
}
