import { counter, type Logger } from '@requester/shared';

/**
 * The one record of an operator action, whichever face ran it (CLI, admin API, UI): a log line,
 * a metric, and the task journal's `admin_action` event on each request it named.
 */
const adminActions = counter(
  'admin_actions_total',
  'operator actions (admin API, UI and CLI), by action, actor (API key name, or cli:<user>) and outcome',
  ['action', 'actor', 'outcome'],
);

export interface AdminActionEvent {
  action: string;
  /** Who: the admin key's name, or `cli:<os user>`. */
  actor: string;
  target: Record<string, unknown>;
  outcome: 'done' | 'failed';
  at: string;
}

/**
 * Records an operator action: a log line at info and the `admin_actions_total` metric, then
 * `journalAdminAction` when one is wired — the task journal's hook: an `admin_action` event for
 * each request the action names (runtime/journal.ts).
 */
export async function recordAdminAction(
  logger: Logger,
  event: Omit<AdminActionEvent, 'at'>,
  journalAdminAction?: (event: AdminActionEvent) => Promise<void>,
): Promise<void> {
  const full = { ...event, at: new Date().toISOString() };
  logger.info(
    { adminAction: full.action, actor: full.actor, target: full.target, outcome: full.outcome },
    'admin action',
  );
  adminActions.inc({ action: full.action, actor: full.actor, outcome: full.outcome });
  await journalAdminAction?.(full).catch((err: unknown) =>
    logger.warn({ err, adminAction: full.action }, 'admin action not journaled'),
  );
}
