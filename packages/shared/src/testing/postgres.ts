import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createPg } from '../pg/index.ts';
import { freePort, type PrivateServer } from './server.ts';

/** `stop` is the fast shutdown (SIGINT); `kill` hits the postmaster, and `restart` replays the WAL. */
export interface PrivatePostgres extends PrivateServer {
  /** `postgres://postgres@127.0.0.1:<port>` — append `/<database>` (created on first use by Requester). */
  url: string;
}

export interface PrivatePostgresOptions {
  /** Folder of initdb and postgres; default the newest `/usr/lib/postgresql/<version>/bin`. */
  binDir?: string;
  /** Password authentication (SCRAM-SHA-256) over TCP for user `postgres`, instead of trust. */
  password?: string;
}

const run = promisify(execFile);

/** Bound on one start: WAL recovery after a crash, and old backends letting go of the shared memory. */
const START_TIMEOUT_MS = 30_000;

/**
 * A PostgreSQL server of its own (Debian's binaries, a throwaway cluster in a temporary folder, a
 * free loopback port, trust auth), for tests that crash and restart PostgreSQL without touching
 * the shared one.
 */
export async function startPrivatePostgres(options: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
  const bin = options.binDir ?? newestBinDir();
  const port = await freePort();
  const { password } = options;
  const url = `postgres://postgres${password ? `:${encodeURIComponent(password)}` : ''}@127.0.0.1:${port}`;
  const dir = await mkdtemp(path.join(tmpdir(), 'requester-pg-'));
  // PostgreSQL refuses to run as root. As root, run it as the `postgres` user — by uid/gid on the
  // child itself rather than through `runuser`, which forks and would stand between us and the
  // postmaster: kill() must signal the postmaster, not a wrapper that leaves it running.
  const user = process.getuid?.() === 0 ? await postgresUser() : undefined;
  if (user) await chown(dir, user.uid, user.gid);
  // The password goes through a file in the cluster's own folder (not argv, which `ps` shows).
  const pwfile = path.join(dir, 'pwfile');
  const data = path.join(dir, 'data');
  const auth = password
    ? ['--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${pwfile}`]
    : ['--auth=trust'];
  try {
    if (password) {
      await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
      if (user) await chown(pwfile, user.uid, user.gid);
    }
    await run(
      path.join(bin, 'initdb'),
      ['-D', data, '-U', 'postgres', ...auth, '-E', 'UTF8', '--locale=C', '--no-sync'],
      { ...(user ?? {}), env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const args = ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', dir];
  let child: ChildProcess | undefined;
  let log = '';

  const halt = async (signal: NodeJS.Signals) => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill(signal);
    await exited;
  };
  const start = async () => {
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      log = '';
      const running = spawn(path.join(bin, 'postgres'), args, {
        stdio: ['ignore', 'ignore', 'pipe'],
        ...(user ?? {}),
      });
      child = running;
      running.stderr?.on('data', (chunk: Buffer) => {
        log = (log + chunk.toString('utf8')).slice(-4_000);
      });
      const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
      if (await answers(url, exited, deadline)) return;
      await halt('SIGKILL');
      // After a kill -9 the backends of the old postmaster notice its death only a moment later,
      // and until they exit they hold its shared memory: the new postmaster refuses to start
      // ("pre-existing shared memory block is still in use"). Try again until the deadline.
      if (Date.now() >= deadline)
        throw new Error(`postgres did not start on port ${port} within ${START_TIMEOUT_MS} ms:\n${log}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  try {
    await start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url,
    async stop() {
      // SIGINT is PostgreSQL's fast shutdown (SIGTERM, "smart", would wait for every client to leave).
      await halt('SIGINT');
      await rm(dir, { recursive: true, force: true });
    },
    kill: () => halt('SIGKILL'),
    restart: start,
  };
}

/** `select 1` until the server answers; false when the postmaster exits first or at the deadline. */
async function answers(url: string, exited: Promise<void>, deadline: number): Promise<boolean> {
  let gone = false;
  void exited.then(() => (gone = true));
  while (!gone && Date.now() < deadline) {
    const probe = createPg({ url: `${url}/postgres`, max: 1 });
    const up = await probe`select 1`.then(
      () => true,
      () => false,
    );
    await probe.end({ timeout: 1 });
    if (up) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

function newestBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root)
    .filter((v) => /^\d+(\.\d+)?$/.test(v))
    .sort((a, b) => Number(a) - Number(b));
  const newest = versions.at(-1);
  if (!newest) throw new Error(`no PostgreSQL under ${root} (apt-get install postgresql)`);
  return path.join(root, newest, 'bin');
}

async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const { stdout } = await run('getent', ['passwd', 'postgres']);
  const [, , uid, gid] = stdout.trim().split(':');
  if (uid === undefined || gid === undefined) throw new Error('no postgres user to run PostgreSQL as');
  return { uid: Number(uid), gid: Number(gid) };
}
