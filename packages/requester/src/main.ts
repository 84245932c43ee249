import { readFileSync } from 'node:fs';
import { CONFIG_VARIABLES, type Config, type ConfigOverrides, loadConfig } from '@requester/shared/config';
import { ConfigError, UsageError } from '@requester/shared/errors';
import { ROLE_NAMES, type RoleName } from '@requester/shared/role/names';
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { parseRoles } from './cli-roles.ts';
import { EXIT_CODES_HELP } from './commands/common.ts';
import { registerAdminCommands } from './commands/index.ts';
import {
  childAdminPort,
  MULTI_PROCESS_ROLES,
  parseProcesses,
  stopWhenOrphaned,
  superviseProcesses,
} from './processes.ts';

// What parsing and --help need is imported above, and nothing more: the runtime (every role's
// clients: kafkajs, ioredis, postgres, got, the OpenTelemetry exporter) and each admin command's
// implementation are imported by the handler that runs them, so `--help`, a usage error or a
// quick admin command does not load the whole service.
// main.test.ts checks it.

/** Exit codes: 0 done, 1 failed at run time, 2 bad usage or configuration. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** Flags that override a configuration variable (the environment is the primary source). */
const FLAG_OVERRIDES: Record<string, keyof ConfigOverrides> = {
  'http-port': 'httpPort',
  'admin-port': 'adminPort',
  'log-level': 'logLevel',
  'kafka-brokers': 'kafkaBrokers',
  'redis-url': 'redisUrl',
  'database-url': 'databaseUrl',
};

/** `requester 0.1.0 (node v24.1.0)`: the package version, and the Node that runs it (bin/requester picks one). */
export function versionLine(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return `requester ${manifest.version} (node ${process.version})`;
}

export function configFrom(argv: Record<string, unknown>): Config {
  const overrides: ConfigOverrides = {};
  for (const [flag, key] of Object.entries(FLAG_OVERRIDES)) {
    const value = argv[flag];
    if (value !== undefined) overrides[key] = String(value);
  }
  return loadConfig(process.env, overrides);
}

function withConfigFlags<T>(y: Argv<T>): Argv<T> {
  for (const [flag, key] of Object.entries(FLAG_OVERRIDES)) {
    const spec = CONFIG_VARIABLES[key];
    y.option(flag, {
      type: 'string',
      describe: `${spec.description} (env ${spec.env})`,
      group: 'Configuration:',
    });
  }
  return y;
}

async function runRoles(argv: Record<string, unknown>): Promise<void> {
  const roles = parseRoles(String(argv.role));
  const config = configFrom(argv);
  const processes = parseProcesses(String(argv.processes), roles);
  if (processes > 1) return runProcesses(argv, roles, config, processes);
  const { createLogger } = await import('@requester/shared/log');
  const { startProcess } = await import('./runtime/index.ts');
  const index = process.env.REQUESTER_PROCESS_INDEX;
  const root = createLogger({ level: config.logLevel });
  const logger = index === undefined ? root : root.child({ process: Number(index) });
  const running = await startProcess(roles, config, logger);
  logger.info({ roles, adminPort: running.adminPort, httpPort: config.httpPort }, 'requester is running');

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(EXIT.failed);
    }
    const deadline = setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeout }, 'graceful shutdown timed out: exiting');
      process.exit(EXIT.failed);
    }, config.shutdownTimeout);
    deadline.unref();
    running.shutdown(signal).then(
      () => process.exit(EXIT.ok),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(EXIT.failed);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  stopWhenOrphaned(onSignal);
}

/** `--processes N`: this process only supervises N children that run the roles (./processes.ts). */
async function runProcesses(
  argv: Record<string, unknown>,
  roles: RoleName[],
  config: Config,
  count: number,
): Promise<void> {
  const { createLogger } = await import('@requester/shared/log');
  const logger = createLogger({ level: config.logLevel });
  const flags = Object.keys(FLAG_OVERRIDES).filter(
    (flag) => flag !== 'admin-port' && argv[flag] !== undefined,
  );
  const code = await superviseProcesses(import.meta.filename, {
    count,
    argsOf: (i) => [
      ...['--role', roles.join(','), '--processes', '1'],
      ...flags.flatMap((flag) => [`--${flag}`, String(argv[flag])]),
      ...['--admin-port', String(childAdminPort(config.adminPort, i))],
    ],
    shutdownTimeoutMs: config.shutdownTimeout,
    logger,
  });
  process.exit(code);
}

/** `a, b and c`: a list of names in a help sentence. */
function inWords(names: readonly string[]): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}

export async function main(args: string[]): Promise<void> {
  const cli = yargs(args)
    .scriptName('requester')
    .usage(
      'Requester performs outgoing HTTP requests for your services: rate limits, caching, strict\n' +
        'per-key ordering, retries, scheduling; every outcome is written to Kafka.\n\n' +
        'Usage: $0 --role <roles> [options]   run roles (comma-separated, or all)\n' +
        '       $0 <command> [options]        admin commands below\n\n' +
        'Every setting is an environment variable; see `$0 config` for the table.',
    )
    .command(
      '$0',
      'run one or more roles in this process',
      (y) =>
        withConfigFlags(
          y
            .option('role', {
              alias: 'r',
              type: 'string',
              default: process.env.REQUESTER_ROLE ?? 'all',
              describe: `roles to run: ${ROLE_NAMES.join(', ')}, or all (env REQUESTER_ROLE)`,
            })
            .option('processes', {
              alias: 'p',
              type: 'string',
              default: '1',
              describe:
                'run the roles in N child processes (auto: one per core), each with admin port ADMIN_PORT+i; ' +
                `only for ${inWords(MULTI_PROCESS_ROLES)}; dead ones are restarted`,
            }),
        ),
      runRoles,
    )
    .example('$0 --role all', 'everything in one process (local development)')
    .example('$0 --role ingress,sync-gateway --http-port 8080', 'the HTTP front only')
    .example('$0 --role executor', 'one executor; scale it with more processes')
    .example('$0 --role executor --processes auto', 'one executor per core, supervised by this process')
    .strict()
    .recommendCommands()
    .help()
    .alias('h', 'help')
    .version('version', 'print the version (and the Node version) and exit', versionLine())
    .epilogue(EXIT_CODES_HELP)
    .wrap(Math.min(110, process.stdout.columns ?? 110))
    .fail((message, err, y) => {
      void y;
      // A thrown error is explained by main's caller, which may have to load the explainer: yargs
      // does not wait for a promise here, and rethrows the error once this returns.
      throw err ?? new UsageError(message);
    });
  registerAdminCommands(cli, configFrom);
  await cli.parseAsync();
}

/** What went wrong, in the terms of the configuration the user can change. */
async function explain(err: Error): Promise<string> {
  // ioredis gives up on a command after its retries without naming the server it could not reach.
  if (err.name === 'MaxRetriesPerRequestError')
    return 'Redis does not answer: check REDIS_URL (and that Redis is up)';
  // The clients' errors are explained by the modules that load them: imported on failure only.
  const { explainDependencyError } = await import('@requester/shared/role');
  return explainDependencyError(err) ?? err.message;
}

/** A call the user can correct (exit code 2): a bad flag or command, or a bad configuration value. */
function isUsageError(err: unknown): boolean {
  return err instanceof UsageError || err instanceof ConfigError;
}

/**
 * Runs one command line to its end and returns its exit code, having said on stderr what went
 * wrong: 2 for a call the user can correct, 1 for a failure at run time. A role or a command that
 * sets `process.exitCode` (a check that found something) keeps it.
 */
export async function runCli(args: string[]): Promise<number> {
  try {
    await main(args);
    return Number(process.exitCode ?? EXIT.ok);
  } catch (err) {
    const usage = isUsageError(err);
    // A usage error says it all; the explainer loads the clients' modules, which `--bogus` must not.
    const text = !(err instanceof Error)
      ? String(err)
      : usage
        ? err.message
        : await explain(err).catch(() => err.message);
    const hint = usage ? "\n\nRun 'requester --help' for usage." : '';
    process.stderr.write(`requester: ${text}${hint}\n`);
    return usage ? EXIT.usage : EXIT.failed;
  }
}

if (import.meta.main) {
  // A command that ends well lets the process end when its clients close (a handle left open is a
  // bug the tests see as a hang); a failure exits at once.
  void runCli(hideBin(process.argv)).then((code) => {
    if (code !== EXIT.ok) process.exit(code);
  });
}
