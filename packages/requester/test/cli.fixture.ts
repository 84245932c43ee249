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
