import { Dependencies, DestinationStore, masterKeysFromConfig, UsageError } from '@requester/shared';
import { commandLogger } from '../../commands/clients.ts';
import { type ConfigFrom, cliActor, printJson, printTable, progress } from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { recordAdminAction } from '../audit.ts';
import {
  createDestination,
  credentialOriginsOf,
  type DestinationView,
  deleteDestination,
  limiterText,
  listDestinations,
  type SpecOptions,
  showDestination,
  specFromOptions,
  updateDestination,
} from './index.ts';

interface DestinationsArgs extends SpecOptions {
  action: 'create' | 'update' | 'list' | 'show' | 'delete';
  name?: string;
  json: boolean;
}

/** `requester destinations`: the implementation, imported when the command runs (./cli.ts defines it). */
export async function destinations(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const args = argv as unknown as DestinationsArgs;
  const config = configFrom(argv);
  const logger = commandLogger(config);
  const deps = new Dependencies(config, logger);
  const hooks = journalHooks(config, deps);
  try {
    const sql = await deps.sql();
    const store = new DestinationStore(sql, credentialOriginsOf(sql), masterKeysFromConfig(config));
    const target = await runAction(store, args);
    if (target)
      await recordAdminAction(
        logger,
        { action: `destinations.${args.action}`, actor: cliActor(), target, outcome: 'done' },
        hooks.hooks.journalAdminAction,
      );
  } finally {
    await hooks.close();
    await deps.close();
  }
}

async function runAction(
  store: DestinationStore,
  args: DestinationsArgs,
): Promise<Record<string, unknown> | undefined> {
  switch (args.action) {
    case 'list': {
      const views = await listDestinations(store);
      if (args.json) printJson(views);
      else printTable(views.map(row));
      return undefined;
    }
    case 'show': {
      const shown = await showDestination(store, nameArg(args));
      if (args.json) printJson(shown);
      else printTable(shown.versions.map(row));
      return undefined;
    }
    case 'create':
    case 'update': {
      const name = nameArg(args);
      const spec = specFromOptions(args);
      const view =
        args.action === 'create'
          ? await createDestination(store, name, spec, cliActor())
          : await updateDestination(store, name, spec, cliActor());
      progress(
        `destination ${name} ${args.action === 'create' ? 'created' : 'updated'}, version ${view.version} ` +
          '(in force everywhere within CREDENTIALS_CACHE_TTL)',
      );
      if (args.json) printJson(view);
      return { destination: name, version: view.version };
    }
    case 'delete': {
      const name = nameArg(args);
      const result = await deleteDestination(store, name);
      progress(`deleted ${name}; its requests are refused within CREDENTIALS_CACHE_TTL`);
      if (args.json) printJson(result);
      return { destination: name };
    }
  }
}

function nameArg(args: DestinationsArgs): string {
  if (!args.name) throw new UsageError(`destinations ${args.action} needs a destination name`);
  return args.name;
}

function row(view: DestinationView) {
  const retry = view.retry as { max: number } | undefined;
  return {
    name: view.name,
    version: view.version,
    baseUrl: view.baseUrl,
    headers:
      [
        ...Object.keys(view.headers ?? {}),
        ...(view.secretHeaderNames ?? []).map((n) => `${n} (secret)`),
      ].join(',') || '-',
    credentials: view.credentials ?? '-',
    limiter: limiterText(view.limiter, '-'),
    retries: retry ? retry.max : 1,
    maxBody: view.maxBodyBytes ?? '-',
    deadline: view.deadline ?? '-',
    created: view.createdAt ?? '-',
    by: view.createdBy ?? '-',
  };
}
