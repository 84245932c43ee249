// What the benchmark scripts that start Requesters share: `--env K=V,...` parsing, the load
// average they print beside every figure, the child processes and the topics, keys and databases
// they must not leave behind, and the pid behind a local port (the shared broker's, whose CPU
// they report).
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { type StackEnv, stackEnv } from '../packages/requester/test/e2e/stack.fixture.ts';
import { deleteAtExit, deleteLeftovers } from '../packages/shared/src/testing/index.ts';

/** `K=V,K2=V2` (the `--env` option) as an environment; a value may itself hold `=`. */
export function envPairs(text: string | undefined): Record<string, string> {
  return Object.fromEntries(
    (text ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/** The 1, 5 and 15 minute load averages: figures from a busy box are read with them. */
export function loadavg(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

const lists: ChildProcess[][] = [];

/**
 * The child processes of this script, sent SIGTERM when it exits (Ctrl-C, `kill` and `timeout`
 * included), so that an interrupted run leaves no Requester behind.
 */
export function childProcesses(): ChildProcess[] {
  const children: ChildProcess[] = [];
  lists.push(children);
  process.on('exit', () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  });
  exitOnSignals();
  return children;
}

/**
 * The e2e fixture's stack environment (topics, Redis prefix and database of its own), all three
 * deleted when the script ends by `exitBench` or a signal.
 */
export async function benchStackEnv(overrides: Record<string, string> = {}): Promise<StackEnv> {
  const stack = await stackEnv(overrides);
  deleteAtExit({ redisPrefix: stack.config.redisPrefix, databaseUrl: stack.config.databaseUrl });
  return stack;
}

/**
 * Ends the script: its child processes first (SIGTERM, SIGKILL after 20 s), so that none writes
 * again, then what it made on the shared stores (`deleteLeftovers`: topics, Redis keys, databases),
 * then `process.exit(code)`. Scripts end with this rather than `process.exit`.
 */
export async function exitBench(code = 0): Promise<never> {
  await endChildren();
  await deleteLeftovers().then(
    ({ topics, keys, databases }) =>
      console.error(`cleaned up: ${topics} topics, ${keys} Redis keys, ${databases} databases`),
    (err: unknown) => console.error(`cleaning up failed (${String(err)}): sweep by hand`),
  );
  process.exit(code);
}

async function endChildren(): Promise<void> {
  const running = lists.flat().filter((child) => child.exitCode === null && child.signalCode === null);
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((resolve) => {
          const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
          child.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

const stops = new Set<() => Promise<unknown>>();
let signalsHandled = false;

/**
 * Runs `stop` (at most 60 s) before this script exits on SIGINT or SIGTERM: for what an exit alone
 * does not end, e.g. a cluster topology's processes and its Redis Cluster, which are stopped by
 * their own `shutdown`. Returns the function that unregisters it (once stopped normally).
 */
export function stopOnSignal(stop: () => Promise<unknown>): () => void {
  exitOnSignals();
  stops.add(stop);
  return () => stops.delete(stop);
}

function exitOnSignals(): void {
  if (signalsHandled) return;
  signalsHandled = true;
  let exiting = false;
  const exitWith = (code: number) => () => {
    if (exiting) return;
    exiting = true;
    const bounded = new Promise((resolve) => setTimeout(resolve, 60_000).unref());
    void Promise.race([Promise.allSettled([...stops].map((stop) => stop())), bounded]).then(() =>
      exitBench(code),
    );
  };
  process.on('SIGINT', exitWith(130));
  process.on('SIGTERM', exitWith(143));
}

// The command line of every bench script (`--help`, readable errors): one helper for bench/ and
// packages/*/bench, kept with the test helpers of shared.
export { parseBenchArgs } from '../packages/shared/src/testing/bench-args.ts';

/** The pid listening on a local TCP port (from /proc/net/tcp and the fds of each process). */
export function pidListeningOn(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || cols[3] !== '0A') continue;
      if (Number.parseInt(cols[1]?.split(':')[1] ?? '', 16) === port) inodes.add(cols[9] as string);
    }
  }
  for (const pid of readdirSync('/proc').filter((p: string) => /^\d+$/.test(p))) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        const m = /^socket:\[(\d+)\]$/.exec(link);
        if (m && inodes.has(m[1] as string)) return Number(pid);
      }
    } catch {}
  }
  return undefined;
}
