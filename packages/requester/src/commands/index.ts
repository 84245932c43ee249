import { KeyStore } from '@requester/ingress';
import {
  CONFIG_VARIABLES,
  type Config,
  configMarkdownTable,
  createPg,
  Dependencies,
  ensureDatabase,
  migrate,
  redactConfigValue,
  type Sql,
  UsageError,
  ValidationError,
} from '@requester/shared';
import type { Argv } from 'yargs';
import { ADMIN_FEATURES } from '../ops/index.ts';
import {
  type ConfigFrom,
  commandLogger,
  EXIT_CODES_HELP,
  printJson,
  printTable,
  progress,
  withJson,
} from './common.ts';

/**
 * Admin subcommands: each one short-lived, printing progress on stderr and results on stdout.
 * The operator features' commands (their `cli.ts`, ops/<feature>/) in the order of ops/index.ts,
 * then the set-up commands of a deployment, here.
 */
export function registerAdminCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  for (const feature of ADMIN_FEATURES) feature.cli?.(cli, configFrom);
  cli.command(
    'topics',
    'create the Kafka topics (in, out, dlq, events) when missing',
    (y) =>
      withJson(y)
        .example('$0 topics', 'before the first start, when KAFKA_CREATE_TOPICS=false for the roles')
        .epilogue(EXIT_CODES_HELP),
    async (argv) => {
      const config = configFrom(argv);
      const deps = new Dependencies({ ...config, createTopics: true }, commandLogger(config));
      const topics = [config.topicIn, config.topicOut, config.topicDlq, config.topicEvents];
      try {
        progress(`ensuring topics ${topics.join(', ')} on ${config.kafkaBrokers}`);
        await deps.topics();
        progress('topics ready');
        if (argv.json) printJson({ topics });
      } finally {
        await deps.close();
      }
    },
  );
  cli.command(
    'migrate',
    'create the PostgreSQL database when missing, apply pending migrations, and create the first admin key from BOOTSTRAP_ADMIN_KEY',
    (y) =>
      withJson(y)
        .example('$0 migrate', 'before a deployment (the Kubernetes pods run it as their init container)')
        .epilogue(EXIT_CODES_HELP),
    async (argv) => {
      const config = configFrom(argv);
      const created = await ensureDatabase(config.databaseUrl);
      if (created) progress('created the database');
      const sql = createPg({ url: config.databaseUrl, max: 1 });
      try {
        const applied = await migrate(sql);
        progress(applied.length ? `applied ${applied.join(', ')}` : 'schema up to date');
        const bootstrapKey = await bootstrapAdminKey(sql, config);
        if (argv.json) printJson({ createdDatabase: created, applied, bootstrapKey });
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
  );
  cli.command(
    'config',
    'print the configuration variables (Markdown table) or the effective values',
    (y) =>
      withJson(y)
        .option('effective', {
          type: 'boolean',
          default: false,
          describe: 'the values this process would use (passwords and secrets shown as [redacted])',
        })
        .example('$0 config', 'every variable, its default and meaning (Markdown)')
        .example('$0 config --effective --json', '{VARIABLE: value} as this environment sets them')
        .epilogue(EXIT_CODES_HELP),
    (argv) => {
      if (!argv.effective) {
        if (argv.json)
          return printJson(
            Object.values(CONFIG_VARIABLES).map((spec) => ({
              env: spec.env,
              default: spec.default ?? null,
              description: spec.description,
            })),
          );
        process.stdout.write(`${configMarkdownTable()}\n`);
        return;
      }
      const config = configFrom(argv);
      const rows = Object.entries(CONFIG_VARIABLES).map(([key, spec]) => ({
        variable: spec.env,
        value: redactConfigValue(config[key as keyof Config]),
      }));
      if (argv.json) return printJson(Object.fromEntries(rows.map((r) => [r.variable, r.value])));
      printTable(
        rows.map((r) => ({
          variable: r.variable,
          value: typeof r.value === 'string' ? r.value : JSON.stringify(r.value),
        })),
      );
    },
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
