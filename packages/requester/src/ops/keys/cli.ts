import { ADMIN_SCOPES, type AdminScope, type IssuedKey, KeyStore, mintToken } from '@requester/ingress';
import { queueFromConfig } from '@requester/queue';
import { type Config, Dependencies, durationToMs, UsageError, ValidationError } from '@requester/shared';
import type { Argv } from 'yargs';
import {
  type ConfigFrom,
  cliActor,
  commandLogger,
  EXIT_CODES_HELP,
  printJson,
  printTable,
  progress,
  withJson,
} from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { humanSize, humanTime } from '../format.ts';
import { createKey, type KeysParts, type QueueShare, revokeKey, rotateKey } from './index.ts';

interface KeysArgs {
  action: 'create' | 'list' | 'revoke' | 'rotate' | 'update' | 'token';
  key?: string;
  name?: string;
  hosts?: string;
  rate?: string;
  sync: boolean;
  schedule: boolean;
  maxBodyBytes?: number;
  admin?: AdminScope;
  kafkaEntry?: boolean;
  credentials?: string;
  weight?: number;
  maxInFlight?: number;
  grace: string;
  all: boolean;
  json: boolean;
}

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
            'update: allow or withdraw Kafka entry (--kafka-entry, --no-kafka-entry), set the --weight or ' +
            'the --max-in-flight; ' +
            'token: a fresh token for BOOTSTRAP_ADMIN_KEY, stored nowhere (no database needed)',
        })
        .positional('key', { type: 'string', describe: 'revoke, rotate, update: the key id or name' })
        .option('name', { type: 'string', describe: 'create: the client name (meta.client of its requests)' })
        .option('hosts', {
          type: 'string',
          describe:
            "create: allowed target hosts, comma-separated ('*.partner.example,api.x.com'); default any",
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
        .option('credentials', {
          type: 'string',
          describe:
            'create: target credentials its requests may name in meta.credentials, comma-separated ' +
            '(requester credentials list); default none',
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
        .example('$0 keys update billing --kafka-entry', 'producers writing in may claim meta.client billing')
        .example('TOKEN=$($0 keys create --name ci)', 'the token alone on stdout')
        .example('$0 keys create --name ci --json', '{id, name, token} as JSON')
        .example(
          'kubectl create secret generic requester-bootstrap --from-literal=BOOTSTRAP_ADMIN_KEY=$($0 keys token)',
          'the first admin key, created by `requester migrate` (README, Deploy)',
        )
        .epilogue(EXIT_CODES_HELP),
    async (argv) => {
      const args = argv as unknown as KeysArgs;
      // Made here, stored nowhere: the database is not needed.
      if (args.action === 'token') {
        process.stdout.write(`${mintToken()}\n`);
        return;
      }
      const config = configFrom(argv);
      const logger = commandLogger(config);
      const deps = new Dependencies(config, logger);
      const hooks = journalHooks(config, deps);
      try {
        const parts: KeysParts = { store: new KeyStore(await deps.sql()), logger };
        if (hooks.hooks.journalAdminAction) parts.journalAdminAction = hooks.hooks.journalAdminAction;
        await runAction(parts, args, config, deps);
      } catch (err) {
        if (err instanceof ValidationError) throw new UsageError(err.message);
        throw err;
      } finally {
        await hooks.close();
        await deps.close();
      }
    },
  );
}

async function runAction(
  parts: KeysParts,
  args: KeysArgs,
  config: Config,
  deps: Dependencies,
): Promise<void> {
  const { store } = parts;
  // The weight and the cap live with the key (PostgreSQL) and, for the queue's lease scripts, in
  // Redis; a Redis that lost its data gets them back from `keys update` (see the README).
  const giveQueue = async (client: string, what: QueueShare) => {
    const queue = queueFromConfig(config, deps.redis(), { notify: false });
    try {
      if (what.weight !== undefined) await queue.setClientWeight(client, what.weight);
      // The cap likewise: every shard (is it capped?) and the client's own slot (its count).
      if (what.maxInFlight !== undefined) await queue.setClientMaxInFlight(client, what.maxInFlight);
    } finally {
      await queue.close();
    }
  };
  switch (args.action) {
    case 'create': {
      if (!args.name) throw new UsageError('keys create needs --name');
      const issued = await createKey({ ...parts, setQueueShare: giveQueue }, cliActor(), {
        name: args.name,
        ...(args.hosts === undefined ? {} : { hosts: args.hosts.split(',').filter((h) => h.trim()) }),
        ...(args.rate === undefined ? {} : { rate: args.rate }),
        sync: args.sync,
        schedule: args.schedule,
        ...(args.maxBodyBytes === undefined ? {} : { maxBodyBytes: args.maxBodyBytes }),
        ...(args.admin === undefined ? {} : { admin: args.admin }),
        kafkaEntry: args.kafkaEntry ?? false,
        ...(args.credentials === undefined ? {} : { credentials: args.credentials.split(',') }),
        ...(args.weight === undefined ? {} : { weight: args.weight }),
        ...(args.maxInFlight === undefined ? {} : { maxInFlight: args.maxInFlight }),
      });
      return printToken(issued, 'created', args.json);
    }
    case 'list': {
      const keys = await store.list(args.all);
      if (args.json) {
        process.stdout.write(`${JSON.stringify(keys, null, 2)}\n`);
        return;
      }
      printTable(
        keys.map((k) => ({
          id: k.id,
          name: k.name,
          hosts: k.hosts?.join(',') ?? '*',
          rate: k.rate ?? '-',
          sync: k.sync,
          schedule: k.schedule,
          maxBody: k.maxBodyBytes === undefined ? 'default' : humanSize(k.maxBodyBytes),
          admin: k.admin ?? '-',
          kafkaEntry: k.kafkaEntry,
          credentials: k.credentials?.join(',') ?? '-',
          weight: k.weight ?? 1,
          maxInFlight: k.maxInFlight ?? '-',
          created: humanTime(k.createdAt.getTime()),
          rotated: humanTime(k.rotatedAt?.getTime()),
          revoked: humanTime(k.revokedAt?.getTime()),
        })),
      );
      return;
    }
    case 'revoke': {
      const key = keyArg(args);
      await revokeKey(parts, cliActor(), key);
      progress(`revoked ${key}; ingresses refuse it within AUTH_CACHE_TTL`);
      if (args.json) printJson({ revoked: key });
      return;
    }
    case 'update': {
      const key = keyArg(args);
      if (args.kafkaEntry === undefined && args.weight === undefined && args.maxInFlight === undefined)
        throw new UsageError(
          'keys update changes Kafka entry, the weight or the cap: give --kafka-entry, --no-kafka-entry, ' +
            '--weight N or --max-in-flight N',
        );
      if (args.weight !== undefined) {
        const client = await store.setWeight(key, args.weight);
        if (client === undefined) throw new UsageError(`no live key with id or name ${key}`);
        await giveQueue(client, { weight: args.weight });
        progress(`weight of ${client} set to ${args.weight}; the queue applies it from its next lease`);
      }
      if (args.maxInFlight !== undefined) {
        const client = await store.setMaxInFlight(key, args.maxInFlight);
        if (client === undefined) throw new UsageError(`no live key with id or name ${key}`);
        await giveQueue(client, { maxInFlight: args.maxInFlight });
        const cap = args.maxInFlight === 0 ? 'lifted' : `set to ${args.maxInFlight}`;
        progress(`cap of ${client}'s tasks in flight ${cap}; the queue applies it from its next lease`);
      }
      if (args.kafkaEntry !== undefined) {
        if (!(await store.setKafkaEntry(key, args.kafkaEntry)))
          throw new UsageError(`no live key with id or name ${key}`);
        const what = args.kafkaEntry ? 'allowed' : 'withdrawn';
        progress(`Kafka entry ${what} for ${key}; routers apply it within AUTH_CACHE_TTL`);
      }
      if (args.json)
        printJson({
          key,
          ...(args.kafkaEntry === undefined ? {} : { kafkaEntry: args.kafkaEntry }),
          ...(args.weight === undefined ? {} : { weight: args.weight }),
          ...(args.maxInFlight === undefined ? {} : { maxInFlight: args.maxInFlight }),
        });
      return;
    }
    case 'rotate': {
      const key = keyArg(args);
      const graceMs = graceArg(args.grace);
      const issued = await rotateKey(parts, cliActor(), key, graceMs);
      return printToken(issued, `rotated (the old secret works for ${args.grace} more)`, args.json);
    }
  }
}

function keyArg(args: KeysArgs): string {
  if (!args.key) throw new UsageError(`keys ${args.action} needs a key id or name`);
  return args.key;
}

function graceArg(text: string): number {
  try {
    return durationToMs(text);
  } catch (err) {
    throw new UsageError(`--grace: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function printToken(issued: IssuedKey, what: string, json: boolean): void {
  progress(`key ${issued.id} (${issued.name}) ${what}; the token is shown this once`);
  if (json) printJson({ id: issued.id, name: issued.name, token: issued.token });
  else process.stdout.write(`${issued.token}\n`);
}
