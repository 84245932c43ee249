import { type AdminScope, type IssuedKey, KeyStore, mintToken } from '@requester/ingress';
import { queueFromConfig } from '@requester/queue';
import { type Config, Dependencies, durationToMs, UsageError, ValidationError } from '@requester/shared';
import { commandLogger } from '../../commands/clients.ts';
import { type ConfigFrom, cliActor, printJson, printTable, progress } from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { recordAdminAction } from '../audit.ts';
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
  virtualHosts?: boolean;
  credentials?: string;
  destinations?: string;
  weight?: number;
  maxInFlight?: number;
  deadline?: string;
  grace: string;
  all: boolean;
  json: boolean;
}

/** `requester keys`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function keys(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
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
        ...(args.virtualHosts ? { virtualHosts: true } : {}),
        ...(args.credentials === undefined ? {} : { credentials: args.credentials.split(',') }),
        ...(args.destinations === undefined ? {} : { destinations: args.destinations.split(',') }),
        ...(args.weight === undefined ? {} : { weight: args.weight }),
        ...(args.maxInFlight === undefined ? {} : { maxInFlight: args.maxInFlight }),
        ...(args.deadline ? { deadline: args.deadline } : {}),
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
          virtualHosts: k.virtualHosts ?? false,
          credentials: k.credentials?.join(',') ?? '-',
          destinations: k.destinations?.join(',') ?? '*',
          weight: k.weight ?? 1,
          maxInFlight: k.maxInFlight ?? '-',
          deadline: k.deadline ?? '-',
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
      if (
        args.kafkaEntry === undefined &&
        args.virtualHosts === undefined &&
        args.weight === undefined &&
        args.maxInFlight === undefined &&
        args.destinations === undefined &&
        args.deadline === undefined
      )
        throw new UsageError(
          'keys update changes Kafka entry, virtual hosts, the weight, the cap, the destinations or the default deadline: give --kafka-entry, ' +
            '--no-kafka-entry, --virtual-hosts, --no-virtual-hosts, --weight N, --max-in-flight N, --destinations a,b or --deadline 5m',
        );
      if (args.deadline !== undefined) {
        const deadline = args.deadline.trim() || undefined;
        if (!(await store.setDeadline(key, deadline)))
          throw new UsageError(`no live key with id or name ${key}`);
        const what = deadline ? `set to ${deadline}` : 'removed';
        progress(`default deadline of ${key} ${what}; ingresses apply it within AUTH_CACHE_TTL`);
        await recordAdminAction(
          parts.logger,
          {
            action: 'keys.update',
            actor: cliActor(),
            target: { key, deadline: deadline ?? null },
            outcome: 'done',
          },
          parts.journalAdminAction,
        );
      }
      if (args.destinations !== undefined) {
        const names = args.destinations.split(',').filter((n) => n.trim());
        if (!(await store.setDestinations(key, names)))
          throw new UsageError(`no live key with id or name ${key}`);
        const what = names.length ? `limited to ${names.join(', ')}` : 'no longer limited to destinations';
        progress(`${key} ${what}; ingresses apply it within AUTH_CACHE_TTL`);
        await recordAdminAction(
          parts.logger,
          { action: 'keys.update', actor: cliActor(), target: { key, destinations: names }, outcome: 'done' },
          parts.journalAdminAction,
        );
      }
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
      if (args.virtualHosts !== undefined) {
        if (!(await store.setVirtualHosts(key, args.virtualHosts)))
          throw new UsageError(`no live key with id or name ${key}`);
        const what = args.virtualHosts ? 'allowed' : 'withdrawn';
        progress(`virtual hosts ${what} for ${key}; ingresses apply it within AUTH_CACHE_TTL`);
      }
      if (args.json)
        printJson({
          key,
          ...(args.kafkaEntry === undefined ? {} : { kafkaEntry: args.kafkaEntry }),
          ...(args.virtualHosts === undefined ? {} : { virtualHosts: args.virtualHosts }),
          ...(args.weight === undefined ? {} : { weight: args.weight }),
          ...(args.maxInFlight === undefined ? {} : { maxInFlight: args.maxInFlight }),
          ...(args.destinations === undefined ? {} : { destinations: args.destinations }),
          ...(args.deadline === undefined ? {} : { deadline: args.deadline.trim() || null }),
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
