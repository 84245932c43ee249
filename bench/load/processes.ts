/** The processes of a load run: the test target, and each side's Requester (and its executors). */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Pool } from 'undici';
import { eventually, freePort } from '../../packages/shared/src/testing/index.ts';
import { benchStackEnv } from '../harness.ts';
import { ResultReader } from './results.ts';
import { args, children, connections, extraEnv, here } from './settings.ts';

/** Waits until `check` holds (a failing check counts as not yet), for at most 90 s. */
export function ready(what: string, check: () => Promise<boolean>): Promise<void> {
  return eventually(() => check().catch(() => false), 90_000, `${what} ready`);
}

export async function startTarget(): Promise<{ url: string; pid: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(here, 'k6/target/serve.ts'), String(port)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await ready('target', async () => (await fetch(`${url}/echo`)).ok);
  return { url, pid: child.pid as number };
}

export interface Side {
  label: string;
  pid: number;
  /** The `--processes N` executor supervisor, with --executors. */
  executorPid?: number;
  /** Its admin URL (with --executors 1 the supervisor runs the executor itself). */
  executorAdminUrl?: string;
  env: Record<string, string>;
  httpUrl: string;
  token: string;
  pool: Pool;
  results: ResultReader;
  adminUrl: string;
}

/** A Requester from `root` on topics, prefix and database of its own. */
export async function startRequester(label: string, root: string, executors?: number): Promise<Side> {
  // The e2e stack's environment: topics (events included), Redis prefix and database of its own.
  const stack = await benchStackEnv({ KAFKA_BROKERS: args.brokers, LOG_LEVEL: 'warn', ...extraEnv });
  const { env } = stack;
  const bin = path.join(root, 'packages/requester/bin/requester');
  const roles = executors ? 'ingress,sync-gateway,router,relay' : (args.roles ?? 'all');
  const child = spawn(bin, ['--role', roles], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  await ready(`requester ${label}`, async () => (await fetch(`${stack.adminUrl}/readyz`)).status === 200);
  const executor = executors ? await startExecutors(label, bin, env, executors) : undefined;
  const token = await createKey(bin, env);
  const results = new ResultReader(env.KAFKA_TOPIC_OUT as string);
  await results.start();
  const { httpUrl } = stack;
  const pool = new Pool(httpUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const { adminUrl } = stack;
  return {
    label,
    pid: child.pid as number,
    executorPid: executor?.pid,
    executorAdminUrl: executor?.adminUrl,
    env,
    httpUrl,
    token,
    pool,
    results,
    adminUrl,
  };
}

/** `requester --role executor --processes n` beside a Requester; resolves when every child is ready. */
export async function startExecutors(
  label: string,
  bin: string,
  env: Record<string, string>,
  n: number,
): Promise<{ pid: number; adminUrl: string }> {
  const adminPort = await freePort();
  const child = spawn(bin, ['--role', 'executor', '--processes', String(n)], {
    env: { ...process.env, ...env, ADMIN_PORT: String(adminPort) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  for (let i = 0; i < n; i++) {
    const url = `http://127.0.0.1:${adminPort + i}/readyz`;
    await ready(`executor ${i} of ${label}`, async () => (await fetch(url)).status === 200);
  }
  return { pid: child.pid as number, adminUrl: `http://127.0.0.1:${adminPort}` };
}

/** An API key allowed sync calls, made with the CLI as an operator would. */
export function createKey(bin: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['keys', 'create', '--name', 'bench', '--sync'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('exit', (code) =>
      code === 0 ? resolve(out.trim()) : reject(new Error(`keys create exited ${code}`)),
    );
  });
}
