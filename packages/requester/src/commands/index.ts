import {
  CONFIG_VARIABLES,
  type Config,
  configMarkdownTable,
  createPg,
  Dependencies,
  ensureDatabase,
  migrate,
  redactConfigValue,
} from '@requester/shared';
import type { Argv } from 'yargs';
import { registerCancelCommand } from '../ops/cancel/cli.ts';
import { registerPauseCommands } from '../ops/pause/cli.ts';
import { registerTasksCommands } from '../ops/tasks/cli.ts';
import { registerBreakersCommands } from './breakers.ts';
import {
  type ConfigFrom,
  commandLogger,
  EXIT_CODES_HELP,
  printJson,
  printTable,
  progress,
  withJson,
} from './common.ts';
import { registerDlqCommands } from './dlq.ts';
import { registerKeysCommands } from './keys.ts';
import { registerLimiterCommands } from './limiter.ts';
import { registerOutboxCommands } from './outbox.ts';
import { registerQueueCommands } from './queue.ts';
import { registerTraceCommand } from './trace.ts';

/** Admin subcommands: each one short-lived, printing progress on stderr and results on stdout. */
export function registerAdminCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  registerQueueCommands(cli, configFrom);
  registerDlqCommands(cli, configFrom);
  registerKeysCommands(cli, configFrom);
  registerTraceCommand(cli, configFrom);
  registerBreakersCommands(cli, configFrom);
  registerOutboxCommands(cli, configFrom);
  registerLimiterCommands(cli, configFrom);
  registerCancelCommand(cli, configFrom);
  registerPauseCommands(cli, configFrom);
  registerTasksCommands(cli, configFrom);
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
    'create the PostgreSQL database when missing and apply pending migrations',
    (y) => withJson(y).example('$0 migrate', 'before a deployment, once').epilogue(EXIT_CODES_HELP),
    async (argv) => {
      const config = configFrom(argv);
      const created = await ensureDatabase(config.databaseUrl);
      if (created) progress('created the database');
      const sql = createPg({ url: config.databaseUrl, max: 1 });
      try {
        const applied = await migrate(sql);
        progress(applied.length ? `applied ${applied.join(', ')}` : 'schema up to date');
        if (argv.json) printJson({ createdDatabase: created, applied });
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
