import { type ChildProcess, fork } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { UsageError } from '@requester/shared/errors';
import type { Logger } from '@requester/shared/log';
import { ROLE_LISTENS_ON_HTTP, ROLE_NAMES, type RoleName } from '@requester/shared/role/names';

/**
 * Roles that may run in several processes of one `requester`: they have no HTTP listener of their
 * own (only the admin port, which each child gets apart), so N copies never compete for one port.
 * The HTTP roles scale with more `requester` processes behind a load balancer (README, Scale-out).
 */
export const MULTI_PROCESS_ROLES: readonly RoleName[] = ROLE_NAMES.filter(
  (role) => !ROLE_LISTENS_ON_HTTP[role],
);

/** `--processes N|auto` → a count; `auto` is one process per core this Node may use. */
export function parseProcesses(text: string, roles: RoleName[]): number {
  const count = text === 'auto' ? availableParallelism() : Number(text);
  if (!Number.isInteger(count) || count < 1)
    throw new UsageError(`--processes must be a positive integer or auto, not "${text}"`);
  const listening = roles.filter((r) => !MULTI_PROCESS_ROLES.includes(r));
  if (count > 1 && listening.length > 0) {
    throw new UsageError(
      `--processes runs only ${MULTI_PROCESS_ROLES.join(', ')} (roles without an HTTP listener); ` +
        `${listening.join(', ')} would share one HTTP port: run more requester processes instead`,
    );
  }
  return count;
}

/** Admin port of child `index`: consecutive ports from ADMIN_PORT, or 0 (any) when ADMIN_PORT is 0. */
export function childAdminPort(adminPort: number, index: number): number {
  return adminPort === 0 ? 0 : adminPort + index;
}

export interface SupervisorOptions {
  count: number;
  /** The CLI arguments of child `index` (the same roles and flags, its own admin port). */
  argsOf(index: number): string[];
  shutdownTimeoutMs: number;
  logger: Logger;
}

const EXIT_USAGE = 2;
const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;
/** A child that ran this long is healthy again: its next crash restarts it without delay build-up. */
const STABLE_AFTER_MS = 30_000;
/** Beyond SHUTDOWN_TIMEOUT: the children enforce their own deadline; this is for a stuck one. */
const SHUTDOWN_GRACE_MS = 2_000;

interface Slot {
  index: number;
  child: ChildProcess | undefined;
  startedAt: number;
  failures: number;
  restart: NodeJS.Timeout | undefined;
  exitCode: number | undefined;
}

/**
 * Runs `count` copies of this CLI and keeps them running: a child that dies unexpectedly is
 * restarted (exponential backoff); SIGTERM/SIGINT are forwarded and the parent exits when all
 * children have, 0 only if every one drained cleanly. Children live in a process group of their own
 * so a terminal's Ctrl-C reaches them once, through the parent; and they stop when the parent
 * disappears (their IPC channel closes: see `stopWhenOrphaned`).
 */
export function superviseProcesses(entry: string, options: SupervisorOptions): Promise<number> {
  const { count, logger } = options;
  const slots: Slot[] = Array.from({ length: count }, (_, index) => ({
    index,
    child: undefined,
    startedAt: 0,
    failures: 0,
    restart: undefined,
    exitCode: undefined,
  }));
  let stopping = false;

  return new Promise<number>((resolve) => {
    const finishIfDone = () => {
      if (!stopping || slots.some((s) => s.child)) return;
      resolve(slots.every((s) => (s.exitCode ?? 0) === 0) ? 0 : 1);
    };

    const start = (slot: Slot) => {
      slot.restart = undefined;
      const child = fork(entry, options.argsOf(slot.index), {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        detached: true,
        env: { ...process.env, REQUESTER_PROCESS_INDEX: String(slot.index) },
      });
      slot.child = child;
      slot.startedAt = Date.now();
      logger.info({ process: slot.index, childPid: child.pid }, 'process started');
      child.on('exit', (code, signal) => onExit(slot, child, code, signal));
    };

    const onExit = (slot: Slot, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null) => {
      if (slot.child !== child) return;
      slot.child = undefined;
      slot.exitCode = code ?? 1;
      if (stopping) {
        logger.info({ process: slot.index, childPid: child.pid, code, signal }, 'process stopped');
        return finishIfDone();
      }
      if (code === EXIT_USAGE) {
        logger.error(
          { process: slot.index, childPid: child.pid, code },
          'process refused its configuration: stopping',
        );
        return stopAll('SIGTERM');
      }
      if (Date.now() - slot.startedAt >= STABLE_AFTER_MS) slot.failures = 0;
      const delayMs = Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** slot.failures);
      slot.failures += 1;
      logger.error(
        { process: slot.index, childPid: child.pid, code, signal, restartInMs: delayMs },
        'process died unexpectedly: restarting it',
      );
      slot.restart = setTimeout(() => start(slot), delayMs);
    };

    const stopAll = (signal: NodeJS.Signals) => {
      stopping = true;
      for (const slot of slots) {
        if (slot.restart) clearTimeout(slot.restart);
        slot.child?.kill(signal);
      }
      const deadline = setTimeout(() => {
        logger.error(
          { timeoutMs: options.shutdownTimeoutMs },
          'processes did not stop in time: killing them',
        );
        for (const slot of slots) {
          slot.exitCode = 1;
          slot.child?.kill('SIGKILL');
        }
      }, options.shutdownTimeoutMs + SHUTDOWN_GRACE_MS);
      deadline.unref();
      finishIfDone();
    };

    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        logger.warn({ signal }, 'second signal: killing the processes');
        for (const slot of slots) slot.child?.kill('SIGKILL');
        return resolve(1);
      }
      logger.info({ signal, processes: count }, 'stopping the processes');
      stopAll(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    for (const slot of slots) start(slot);
  });
}

/** In a supervised child: a parent that vanished (even by SIGKILL) closes the IPC channel; stop then. */
export function stopWhenOrphaned(stop: (reason: NodeJS.Signals) => void): void {
  if (!process.channel) return;
  process.channel.unref();
  process.once('disconnect', () => stop('SIGTERM'));
}
