/**
 * Checks of what callers hand the queue, made before any script runs: a bad argument is refused
 * with `invalid_request` (or `payload_too_large`) here, never half-applied on some shards.
 */
import { RequesterError } from '@requester/shared/errors';
import type { PublishTask } from './types.ts';

/** Bounds of `PublishTask.priority` (a band character each in the shard's `pready` line). */
export const MIN_PRIORITY = -10;
export const MAX_PRIORITY = 10;

// Due times are 11 hex digits in pending members (see shard.lua): beyond year 2500 is an error.
const MAX_DUE_MS = 0xfff_ffff_ffff;

export function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw new RequesterError('invalid_request', `${name} must be a positive integer, got ${value}`);
  }
  return value;
}

export function nonNegativeInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0) {
    throw new RequesterError('invalid_request', `${name} must be a non-negative integer, got ${value}`);
  }
  return value;
}

/** A replacement payload: non-empty (empty means "keep" to the script) and within the size cap. */
export function checkedPayload(payload: string, maxPayloadBytes: number): string {
  if (typeof payload !== 'string' || payload === '') {
    throw new RequesterError('invalid_request', 'a replacement payload must be a non-empty string');
  }
  if (Buffer.byteLength(payload) > maxPayloadBytes) {
    throw new RequesterError('payload_too_large', `replacement payload exceeds ${maxPayloadBytes} bytes`);
  }
  return payload;
}

export function checkClient(client: string): void {
  if (typeof client !== 'string' || client === '' || /[\s\0]/.test(client)) {
    throw new RequesterError('invalid_request', `not a client name: ${JSON.stringify(client)}`);
  }
}

export function validateTask(task: PublishTask, maxPayloadBytes: number): void {
  const bad = (message: string) =>
    new RequesterError('invalid_request', `queue task ${JSON.stringify(task.id)}: ${message}`);
  if (typeof task.id !== 'string' || task.id === '') throw bad('id must be a non-empty string');
  if (task.partition !== undefined && (typeof task.partition !== 'string' || task.partition === '')) {
    throw bad('partition must be a non-empty string when given');
  }
  // NUL separates the partition from the sort key in pending members (see shard.lua).
  if ((task.partition ?? task.id).includes('\0'))
    throw bad('partition (or id used as one) must not contain NUL');
  if (typeof task.payload !== 'string') throw bad('payload must be a string');
  if (task.payload.length > maxPayloadBytes / 3 && Buffer.byteLength(task.payload) > maxPayloadBytes) {
    throw new RequesterError(
      'payload_too_large',
      `queue task ${JSON.stringify(task.id)}: payload of ${Buffer.byteLength(task.payload)} bytes exceeds ${maxPayloadBytes}`,
    );
  }
  if (
    task.dueAt !== undefined &&
    (!Number.isInteger(task.dueAt) || task.dueAt < 0 || task.dueAt > MAX_DUE_MS)
  ) {
    throw bad('dueAt must be an integer epoch ms');
  }
  if (task.delayMs !== undefined && (!Number.isInteger(task.delayMs) || task.delayMs < 0)) {
    throw bad('delayMs must be a non-negative integer');
  }
  if (
    task.priority !== undefined &&
    (!Number.isInteger(task.priority) || task.priority < MIN_PRIORITY || task.priority > MAX_PRIORITY)
  ) {
    throw bad(`priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}`);
  }
}
