import { execFile, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Config, createLogger, Dependencies } from '@requester/shared';
import { freePort } from '@requester/shared/testing';
import { waitReady } from '../../scripts/cluster/topology.ts';

/**
 * The previous release beside this checkout, for the rolling-upgrade tier: its source from the git
 * tag the CHANGELOG names, installed from the same pnpm store, and its roles as processes of their
 * own on the stores the test chooses.
 */
const run = promisify(execFile);
const OUTPUT = 64 * 1024 * 1024;

export const ROOT = path.resolve(import.meta.dirname, '../../../..');
export const CURRENT_BIN = path.join(ROOT, 'packages/requester/bin/requester');

/** The newest released version of a changelog: its first `## X.Y.Z` heading (Unreleased comes before it). */
export function previousVersion(changelog: string): string {
  const heading = /^## (\d+\.\d+\.\d+)\s*$/m.exec(changelog);
  if (!heading?.[1]) throw new Error('CHANGELOG.md names no released version (a "## X.Y.Z" heading)');
  return heading[1];
}

/** The commit a release's CHANGELOG section names (`commit \`<hex>\``), if it names one. */
export function releaseCommit(changelog: string, version: string): string | undefined {
  const start = changelog.search(new RegExp(`^## ${version.replaceAll('.', '\\.')}\\s*$`, 'm'));
  if (start < 0) return undefined;
  const rest = changelog.slice(start + 1);
  const section = rest.slice(0, rest.search(/^## /m) >>> 0);
  return /commit `([0-9a-f]{7,40})`/.exec(section)?.[1];
}

export interface PreviousRelease {
  version: string;
  tag: string;
  commit: string;
  /** Where its source is unpacked and installed. */
  root: string;
  bin: string;
  /** How long `./dev install` took there. */
  installMs: number;
}

/**
 * Unpacks the previous release (`git archive` of its tag, or of the commit its CHANGELOG entry
 * names when the clone has no tags: no worktree registered in the shared repository) into `into`
 * and installs it with `./dev install`. A release found neither way fails: a clone without it
 * cannot say whether an upgrade works, and a skipped test would say nothing either.
 */
export async function installPreviousRelease(into: string): Promise<PreviousRelease> {
  const changelog = readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
  const version = previousVersion(changelog);
  const tag = `v${version}`;
  const verify = (ref: string) =>
    run('git', ['-C', ROOT, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`]).then((out) =>
      out.stdout.trim(),
    );
  // A shallow clone, or one made without tags (CI's checkouts often are), can still fetch the one tag.
  const fetched = () =>
    run('git', ['-C', ROOT, 'fetch', '--quiet', '--depth=1', 'origin', `refs/tags/${tag}:refs/tags/${tag}`]);
  // Without the tag anywhere, the commit the release's entry names, if this clone's history has it
  // (it is an ancestor of main: a clone of main without tags still holds it).
  const named = releaseCommit(changelog, version);
  const byEntry = async () => {
    if (!named) throw new Error('no commit named');
    const commit = await verify(named);
    await run('git', ['-C', ROOT, 'merge-base', '--is-ancestor', commit, 'HEAD']);
    return commit;
  };
  const commit = await verify(`refs/tags/${tag}`)
    .catch(() => fetched().then(() => verify(`refs/tags/${tag}`)))
    .catch(byEntry)
    .catch(() => {
      throw new Error(
        `the release ${version} (the CHANGELOG's newest) is not in this clone: no tag ${tag} here nor at its origin, and ${named ? `its entry's commit ${named} is not in this history` : 'its entry names no commit'}: git fetch --tags, or cut it (CONTRIBUTING.md, "Releases")`,
      );
    });
  mkdirSync(into, { recursive: true });
  await run('sh', ['-c', 'git -C "$1" archive "$2" | tar -x -C "$3"', 'sh', ROOT, commit, into], {
    maxBuffer: OUTPUT,
  });
  // The pnpm that installed this checkout (a global one or ./dev's own in .run/tools) installs the
  // release too, from the same store.
  const PATH = `${path.join(ROOT, '.run/tools/node_modules/.bin')}:${process.env.PATH ?? ''}`;
  const started = performance.now();
  await run(path.join(into, 'dev'), ['install'], {
    cwd: into,
    env: { ...process.env, PATH },
    timeout: 150_000,
    maxBuffer: OUTPUT,
  });
  const installMs = performance.now() - started;
  return {
    version,
    tag,
    commit,
    root: into,
    bin: path.join(into, 'packages/requester/bin/requester'),
    installMs,
  };
}

/** `requester migrate` of one version against the stores of `env`. */
export async function migrateWith(bin: string, env: Record<string, string>): Promise<void> {
  await run(bin, ['migrate'], { env: { ...process.env, ...env }, timeout: 120_000, maxBuffer: OUTPUT });
}

/**
 * The stores of a stack as `bin`'s version makes them on first start: its topics (created as the
 * roles would), then its migrations.
 */
export async function storesOf(
  bin: string,
  stack: { config: Config; env: Record<string, string> },
): Promise<void> {
  const deps = new Dependencies({ ...stack.config, createTopics: true }, createLogger({ level: 'warn' }));
  await deps.topics().finally(() => deps.close());
  await migrateWith(bin, stack.env);
}

export interface RoleProcess {
  /** e.g. `0.1.0 executor-1`; its log is `<logDir>/<name>.log`. */
  name: string;
  adminUrl: string;
  /** Processes running the ingress: their HTTP API. */
  httpUrl?: string;
  /** SIGTERM (a graceful stop, as a rollout does) and its exit. */
  stop(): Promise<void>;
  exited: Promise<void>;
}

/** Starts `requester --role <roles>` of one version and waits until it is ready (or fails with its log's end). */
export async function startRole(options: {
  bin: string;
  name: string;
  roles: string;
  env: Record<string, string>;
  logDir: string;
}): Promise<RoleProcess> {
  const adminPort = await freePort();
  const httpPort = options.roles.includes('ingress') ? await freePort() : undefined;
  const file = path.join(options.logDir, `${options.name.replaceAll(' ', '-')}.log`);
  const log = openSync(file, 'a');
  const child = spawn(options.bin, ['--role', options.roles], {
    env: {
      ...process.env,
      ...options.env,
      KAFKA_CLIENT_ID: `${options.env.KAFKA_CLIENT_ID ?? 'upgrade'}-${options.name.replaceAll(' ', '-')}`,
      ADMIN_PORT: String(adminPort),
      ...(httpPort ? { HTTP_PORT: String(httpPort) } : {}),
    },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const role: RoleProcess = {
    name: options.name,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    ...(httpPort ? { httpUrl: `http://127.0.0.1:${httpPort}` } : {}),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      await exited;
      clearTimeout(timer);
    },
  };
  let starting = true;
  const died = exited.then(() => {
    if (starting) throw new Error(`${options.name} exited while starting; its log ends:\n${tail(file)}`);
  });
  try {
    await Promise.race([waitReady(role, 120_000), died]);
  } catch (err) {
    await role.stop();
    throw err;
  } finally {
    starting = false;
  }
  return role;
}

function tail(file: string, lines = 30): string {
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** The sum of a Prometheus counter over its labels, read from a process's /metrics. */
export async function counter(process: Pick<RoleProcess, 'adminUrl'>, name: string): Promise<number> {
  const text = await (await fetch(`${process.adminUrl}/metrics`)).text();
  const line = new RegExp(`^\\w*${name}(\\{[^}]*\\})? (\\S+)$`, 'gm');
  return [...text.matchAll(line)].reduce((sum, m) => sum + Number(m[2]), 0);
}
