import { breakerFromConfig } from '@requester/policies';
import {
  Dependencies,
  DestinationStore,
  destinationSubject,
  masterKeysFromConfig,
  UsageError,
} from '@requester/shared';
import { commandLogger, commandRedis } from '../../commands/clients.ts';
import { type ConfigFrom, cliActor, printJson, printTable, progress } from '../../commands/common.ts';
import { journalHooks } from '../../runtime/journal.ts';
import { recordAdminAction } from '../audit.ts';
import {
  breakerText,
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
import { type DestinationStatus, destinationStatus } from './status.ts';

interface DestinationsArgs extends SpecOptions {
  action: 'create' | 'update' | 'list' | 'show' | 'status' | 'history' | 'delete' | 'recover';
  name?: string;
  json: boolean;
  since?: string;
  until?: string;
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
    if (args.action === 'recover') {
      // The destination must exist now; its dead letters are found by the name they carried.
      const name = (await showDestination(store, nameArg(args))).current.name;
      if (!args.since)
        throw new UsageError('destinations recover needs --since (RFC 3339): the start of the range');
      // The DLQ replay does the rest (preview, progress, once each, journal, audit), its
      // selection narrowed to this destination; dead letters marked handled are left out.
      const { dlq } = await import('../dlq/run.ts');
      return await dlq(
        { ...argv, action: 'replay', destination: name, hideHandled: true, all: false, recovering: name },
        configFrom,
      );
    }
    if (args.action === 'history') {
      // Read as a request's story is (requester trace); a deleted destination's history stays readable.
      const name = nameArg(args);
      const { formatStory, traceRequest } = await import('../trace/run.ts');
      const events = await traceRequest(config, destinationSubject(name), args.since ?? '1h');
      if (args.json) printJson(events);
      else process.stdout.write(formatStory(events, `destination ${name}`));
      return;
    }
    if (args.action === 'status') {
      const { current } = await showDestination(store, nameArg(args));
      const redis = commandRedis(config, logger);
      try {
        const parts = { redis, config, breaker: breakerFromConfig(config, redis, { stateCacheMs: 0 }) };
        const status = await destinationStatus(parts, current);
        if (args.json) printJson(status);
        else printStatus(status);
      } finally {
        redis.disconnect();
      }
      return;
    }
    const record = (target: Record<string, unknown>, outcome: 'done' | 'failed') =>
      recordAdminAction(
        logger,
        { action: `destinations.${args.action}`, actor: cliActor(), target, outcome },
        hooks.hooks.journalAdminAction,
      );
    let target: Record<string, unknown> | undefined;
    try {
      target = await runAction(store, args);
    } catch (err) {
      // A refused change is an operator action too; reading (list, show) is none.
      if (args.name && ['create', 'update', 'delete'].includes(args.action))
        await record({ destination: args.name }, 'failed');
      throw err;
    }
    if (target) await record(target, 'done');
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
    case 'status':
    case 'history':
    case 'recover':
      throw new Error(`${args.action} is run before the other actions`);
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
    concurrency: view.maxConcurrency ?? '-',
    timeout: view.timeout ?? '-',
    maxBody: view.maxBodyBytes ?? '-',
    deadline: view.deadline ?? '-',
    breaker: breakerText(view.breaker),
    pacing: view.pacing === false ? 'off' : 'on',
    created: view.createdAt ?? '-',
    by: view.createdBy ?? '-',
  };
}

function printStatus(status: DestinationStatus): void {
  const { origin } = status;
  const percent = origin.calls.successRate === null ? '-' : `${(origin.calls.successRate * 100).toFixed(1)}%`;
  printTable([
    {
      destination: `${status.destination} v${status.version}`,
      origin: origin.origin,
      breaker: status.breaker ? `${status.breaker.state} (own)` : origin.breaker.state,
      pacing: status.pacing ? 'on' : 'off',
      paused: status.pause ? 'yes' : origin.pause ? 'its origin' : 'no',
      inFlight:
        origin.bulkhead.inFlight === null ? '-' : `${origin.bulkhead.inFlight}/${origin.bulkhead.cap}`,
      pace: origin.pace.rate === null ? '-' : `${origin.pace.rate}/s`,
      [`calls ${origin.calls.windowMinutes}m`]: origin.calls.attempts,
      success: percent,
      p50: origin.calls.p50Ms === null ? '-' : `${origin.calls.p50Ms}ms`,
      quota:
        status.quota
          .map((w) => `${w.used === null ? '?' : Math.ceil(w.used)}/${w.value ?? '?'}`)
          .join(', ') || '-',
    },
  ]);
}
