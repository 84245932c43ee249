import { KeyStore } from '@requester/ingress';
import {
  migrate as applyMigrations,
  bodiesTopicOf,
  CONFIG_VARIABLES,
  type Config,
  configMarkdownTable,
  createPg,
  Dependencies,
  ensureDatabase,
  redactConfigValue,
  type Sql,
  UsageError,
  ValidationError,
} from '@requester/shared';
import { commandLogger } from './clients.ts';
import { type ConfigFrom, printJson, printTable, progress } from './common.ts';

/**
 * The set-up commands' implementations (their definitions, what --help prints, are in ./index.ts),
 * imported when one of them runs.
 */

/** `requester topics`. */
export async function topics(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const config = configFrom(argv);
  const deps = new Dependencies({ ...config, createTopics: true }, commandLogger(config));
  const topics = [
    config.topicIn,
    config.topicOut,
    config.topicDlq,
    config.topicEvents,
    bodiesTopicOf(config),
  ];
  try {
    progress(`ensuring topics ${topics.join(', ')} on ${config.kafkaBrokers}`);
    await deps.topics();
    progress('topics ready');
    if (argv.json) printJson({ topics });
  } finally {
    await deps.close();
  }
}

/** `requester migrate`. */
export async function migrate(argv: Record<string, unknown>, configFrom: ConfigFrom): Promise<void> {
  const config = configFrom(argv);
  const created = await ensureDatabase(config.databaseUrl);
  if (created) progress('created the database');
  const sql = createPg({ url: config.databaseUrl, max: 1 });
  try {
    const applied = await applyMigrations(sql);
    progress(applied.length ? `applied ${applied.join(', ')}` : 'schema up to date');
    const bootstrapKey = await bootstrapAdminKey(sql, config);
    if (argv.json) printJson({ createdDatabase: created, applied, bootstrapKey });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** `requester config`. */
export function config(argv: Record<string, unknown>, configFrom: ConfigFrom): void {
  if (!argv.effective) {
    if (argv.json)
      printJson(
        Object.values(CONFIG_VARIABLES).map((spec) => ({
          env: spec.env,
          default: spec.default ?? null,
          description: spec.description,
        })),
      );
    else process.stdout.write(`${configMarkdownTable()}\n`);
    return;
  }
  const config = configFrom(argv);
  const rows = Object.entries(CONFIG_VARIABLES).map(([key, spec]) => ({
    variable: spec.env,
    value: redactConfigValue(config[key as keyof Config]),
  }));
  if (argv.json) {
    printJson(Object.fromEntries(rows.map((r) => [r.variable, r.value])));
    return;
  }
  printTable(
    rows.map((r) => ({
      variable: r.variable,
      value: typeof r.value === 'string' ? r.value : JSON.stringify(r.value),
    })),
  );
}

/**
 * BOOTSTRAP_ADMIN_KEY: the first admin key (`admin`, admin write), adopted from a token the
 * operator made, so that it never passes through a log or a terminal of the cluster. Only its
 * hash is stored; a name that exists already (live or revoked) is left alone. Returns the id
 * created, null otherwise.
 */
async function bootstrapAdminKey(sql: Sql, config: Config): Promise<string | null> {
  if (!config.bootstrapAdminKey) return null;
  try {
    const id = await new KeyStore(sql).adopt(
      { name: BOOTSTRAP_KEY_NAME, admin: 'write' },
      config.bootstrapAdminKey.reveal(),
    );
    progress(
      id
        ? `created the admin key ${id} (${BOOTSTRAP_KEY_NAME}) from BOOTSTRAP_ADMIN_KEY`
        : `a key named ${BOOTSTRAP_KEY_NAME} exists already: BOOTSTRAP_ADMIN_KEY is not used (remove it from the Secret)`,
    );
    return id ?? null;
  } catch (err) {
    if (err instanceof ValidationError)
      throw new UsageError(`BOOTSTRAP_ADMIN_KEY: ${err.message} (make one with \`requester keys token\`)`);
    throw err;
  }
}

const BOOTSTRAP_KEY_NAME = 'admin';
