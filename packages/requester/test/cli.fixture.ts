import { type ChildProcess, spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The `requester` CLI in a child process (its source, run by this Node), for tests of commands. */
const MAIN = path.resolve(import.meta.dirname, '../src/main.ts');

/**
 * Node's on-disk compile cache, as bin/requester starts the CLI: a command loads every package, and
 * without the cache each start compiles them again (~1.3 s of CPU against ~0.8 s). A test that runs
 * a dozen commands on a loaded box otherwise spends its time compiling.
 */
const COMPILE_CACHE = process.env.NODE_COMPILE_CACHE ?? path.join(tmpdir(), 'requester-node-compile-cache');

export interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function requester(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; exit: Promise<Exit> } {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { ...process.env, NODE_COMPILE_CACHE: COMPILE_CACHE, ...env },
    stdio: 'pipe',
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => {
    stdout += d;
  });
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const exit = new Promise<Exit>((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
  return { child, exit };
}

const ENDS_THE_PROCESS = new Set(['--help', '-h', '--version']);
let turn: Promise<unknown> = Promise.resolve();

/**
 * An admin command run in this process (`runCli`), with `env` over the process's environment for
 * its duration and its stdout and stderr captured: the same code as the child's, without a Node
 * start and a program load per command (about a second each on a loaded box). Calls take turns,
 * since the environment and the streams are the process's. A command that reads stdin, a role, a
 * signal or a command's exit when its clients close (a leaked handle) needs the child: `requester`.
 */
export function requesterInProcess(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  // yargs prints help and the version through console.log and ends the process: a child's work.
  if (args.some((a) => ENDS_THE_PROCESS.has(a))) return requester(args, env).exit;
  const run = turn.then(() => runInProcess(args, env));
  turn = run.catch(() => {});
  return run;
}

async function runInProcess(args: string[], env: Record<string, string>): Promise<Exit> {
  const { runCli } = await import('../src/main.ts');
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  const out = { stdout: '', stderr: '' };
  const writes = { stdout: process.stdout.write, stderr: process.stderr.write };
  const capture = (name: 'stdout' | 'stderr') =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      out[name] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture('stdout');
  process.stderr.write = capture('stderr');
  const exit = process.exit;
  process.exit = ((code?: number) => {
    throw new Error(`the command called process.exit(${code}): run it with requester() instead`);
  }) as typeof process.exit;
  process.exitCode = undefined;
  try {
    const code = await runCli(args);
    return { code, ...out };
  } finally {
    process.stdout.write = writes.stdout;
    process.stderr.write = writes.stderr;
    process.exit = exit;
    process.exitCode = undefined;
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
