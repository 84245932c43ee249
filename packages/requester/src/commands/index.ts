import {
  CONFIG_VARIABLES,
  type Config,
  configMarkdownTable,
  createLogger,
  createPg,
  Dependencies,
  ensureDatabase,
  migrate,
  redactConfigValue,
} from '@requester/shared';
import type { Argv } from 'yargs';
import { type ConfigFrom, progress } from './common.ts';
import { registerDlqCommands } from './dlq.ts';
import { registerKeysCommands } from './keys.ts';
import { registerQueueCommands } from './queue.ts';
import { registerTraceCommand } from './trace.ts';

/** Admin subcommands: each one short-lived, printing progress on stderr and results on stdout. */
export function registerAdminCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  registerQueueCommands(cli, configFrom);
  registerDlqCommands(cli, configFrom);
  registerKeysCommands(cli, configFrom);
  registerTraceCommand(cli, configFrom);
  cli.command(
    'topics',
    'create the Kafka topics (in, out, dlq, events) when missing',
    (y) => y,
    async (argv) => {
      const config = configFrom(argv);
      const deps = new Dependencies(
        { ...config, createTopics: true },
        createLogger({ level: config.logLevel }),
      );
      try {
        progress(
          `ensuring topics ${config.topicIn}, ${config.topicOut}, ${config.topicDlq}, ${config.topicEvents} on ${config.kafkaBrokers}`,
        );
        await deps.topics();
        progress('topics ready');
      } finally {
        await deps.close();
      }
    },
  );
  cli.command(
    'migrate',
    'create the PostgreSQL database when missing and apply pending migrations',
    (y) => y,
    async (argv) => {
      const config = configFrom(argv);
      if (await ensureDatabase(config.databaseUrl)) progress('created the database');
      const sql = createPg({ url: config.databaseUrl, max: 1 });
      try {
        const applied = await migrate(sql);
        progress(applied.length ? `applied ${applied.join(', ')}` : 'schema up to date');
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
  );
  cli.command(
    'config',
    'print the configuration variables (table) or the effective values',
    (y) =>
      y.option('effective', {
        type: 'boolean',
        default: false,
        describe: 'print the values this process would use',
      }),
    (argv) => {
      if (!argv.effective) {
        process.stdout.write(`${configMarkdownTable()}\n`);
        return;
      }
      const config = configFrom(argv);
      const rows = Object.entries(CONFIG_VARIABLES).map(([key, spec]) => [
        spec.env,
        redactConfigValue(config[key as keyof Config]),
      ]);
      process.stdout.write(`${JSON.stringify(Object.fromEntries(rows), null, 2)}\n`);
    },
  );
}
