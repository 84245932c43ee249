import type { CreateKey, IssuedKey, KeyInfo, KeyStore } from '@requester/ingress';
import { type Logger, UsageError, ValidationError } from '@requester/shared';
import { type AdminActionEvent, recordAdminAction } from '../audit.ts';
import { isoTime } from '../format.ts';

/**
 * API keys as an operator manages them (issue 22): the operations behind `requester keys
 * create|list|revoke|rotate` (./cli.ts), `/admin/api/keys…` (./api.ts) and the Keys page
 * (./ui.ts), over the key store of @requester/ingress. Creating, revoking and rotating are
 * recorded operator actions (`keys.create`, `keys.revoke`, `keys.rotate`) naming the key's id,
 * name and scopes — never its token, which is returned once, to the caller, and never again.
 */
/** What the queue keeps of a key: its client's weight and its cap of tasks in flight. */
export interface QueueShare {
  weight?: number;
  maxInFlight?: number;
}

export interface KeysParts {
  store: KeyStore;
  logger: Logger;
  journalAdminAction?: (event: AdminActionEvent) => Promise<void>;
  /** Gives the queue a client's weight and cap (the lease scripts read them from Redis). */
  setQueueShare?: (client: string, share: QueueShare) => Promise<void>;
}

/** A key as listed: its info, times as ISO 8601, with whatever columns its row has. */
export type KeyView = Record<string, unknown> & {
  id: string;
  name: string;
  createdAt: string | null;
  rotatedAt: string | null;
  revokedAt: string | null;
  previousExpiresAt: string | null;
};

export function keyView(info: KeyInfo): KeyView {
  const plain: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(info))
    plain[field] = value instanceof Date ? isoTime(value.getTime()) : value;
  return {
    ...plain,
    id: info.id,
    name: info.name,
    createdAt: isoTime(info.createdAt.getTime()),
    rotatedAt: isoTime(info.rotatedAt?.getTime()),
    revokedAt: isoTime(info.revokedAt?.getTime()),
    previousExpiresAt: isoTime(info.previousExpiresAt?.getTime()),
  };
}

export async function listKeys(store: KeyStore, all = false): Promise<KeyView[]> {
  return (await store.list(all)).map(keyView);
}

/** The scopes of a new key, recorded with the action (no secret among them). */
function scopesOf(spec: CreateKey): Record<string, unknown> {
  const { name: _name, ...scopes } = spec;
  return scopes;
}

export async function createKey(parts: KeysParts, actor: string, spec: CreateKey): Promise<IssuedKey> {
  const issued = await refusing(() => parts.store.create(spec));
  const share: QueueShare = {
    ...(spec.weight !== undefined && spec.weight !== 1 ? { weight: spec.weight } : {}),
    ...(spec.maxInFlight ? { maxInFlight: spec.maxInFlight } : {}),
  };
  if (Object.keys(share).length > 0) await parts.setQueueShare?.(issued.name, share);
  await recordAdminAction(
    parts.logger,
    {
      action: 'keys.create',
      actor,
      target: { key: issued.id, name: issued.name, scopes: scopesOf(spec) },
      outcome: 'done',
    },
    parts.journalAdminAction,
  );
  return issued;
}

export async function revokeKey(parts: KeysParts, actor: string, key: string): Promise<{ revoked: string }> {
  const name = keyArg(key, 'revoke');
  if (!(await parts.store.revoke(name))) throw new UsageError(`no live key with id or name ${name}`);
  await recordAdminAction(
    parts.logger,
    { action: 'keys.revoke', actor, target: { key: name }, outcome: 'done' },
    parts.journalAdminAction,
  );
  return { revoked: name };
}

/** A new secret; the old one is accepted until `oldValidUntil` (the grace). */
export async function rotateKey(
  parts: KeysParts,
  actor: string,
  key: string,
  graceMs: number,
): Promise<IssuedKey & { oldValidUntil: string | null }> {
  const name = keyArg(key, 'rotate');
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new UsageError('grace must be a duration ≥ 0');
  const issued = await parts.store.rotate(name, graceMs);
  if (!issued) throw new UsageError(`no live key with id or name ${name}`);
  const oldValidUntil = isoTime((await parts.store.find(issued.id))?.previousExpiresAt?.getTime());
  await recordAdminAction(
    parts.logger,
    {
      action: 'keys.rotate',
      actor,
      target: { key: issued.id, name: issued.name, oldValidUntil },
      outcome: 'done',
    },
    parts.journalAdminAction,
  );
  return { ...issued, oldValidUntil };
}

function keyArg(key: string | undefined, action: string): string {
  const text = key?.trim();
  if (!text) throw new UsageError(`keys ${action} needs a key id or name`);
  return text;
}

/** What the store refuses (a bad name, a taken name) is the operator's input: a UsageError. */
async function refusing<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof ValidationError) throw new UsageError(err.message);
    throw err;
  }
}
