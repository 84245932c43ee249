import type { Argv } from 'yargs';
import { ADMIN_COMMANDS } from '../ops/commands.ts';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from './common.ts';

/**
 * Admin subcommands: each one short-lived, printing progress on stderr and results on stdout.
 * The operator features' commands (their `cli.ts`, ops/<feature>/) in the order of ops/commands.ts,
 * then the set-up commands of a deployment, here. Each handler imports its implementation
 * (./run.ts, ops/<feature>/run.ts) when it runs: defining the commands, for parsing and --help,
 * loads no client.
 */
export function registerAdminCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  for (const register of ADMIN_COMMANDS) register(cli, configFrom);
  cli.command(
    'topics',
    'create the Kafka topics (in, out, dlq, events) when missing',
    (y) =>
      withJson(y)
        .example('$0 topics', 'before the first start, when KAFKA_CREATE_TOPICS=false for the roles')
        .epilogue(EXIT_CODES_HELP),
    async (argv) => (await import('./run.ts')).topics(argv, configFrom),
  );
  cli.command(
    'migrate',
    'create the PostgreSQL database when missing, apply pending migrations, and create the first admin key from BOOTSTRAP_ADMIN_KEY',
    (y) =>
      withJson(y)
        .example('$0 migrate', 'before a deployment (the Kubernetes pods run it as their init container)')
        .epilogue(EXIT_CODES_HELP),
    async (argv) => (await import('./run.ts')).migrate(argv, configFrom),
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
    async (argv) => (await import('./run.ts')).config(argv, configFrom),
  );
}
