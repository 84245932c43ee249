import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

/** The `requester` CLI in a child process (its source, run by this Node), for tests of commands. */
const MAIN = path.resolve(import.meta.dirname, '../src/main.ts');

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
    env: { ...process.env, ...env },
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
