import type { Logger } from '@requester/shared/log';
import type { Context } from 'hono';
import { callerBindings } from '../../auth/index.ts';
import type { Env } from '../context.ts';

/** From here on, the request logs as the role serving it, with the task's requestId. */
export function useLog(c: Context<Env>, roleLog: Logger | undefined, requestId: string): void {
  const scope = c.get('logScope');
  scope.logger = roleLog ?? scope.logger;
  scope.requestId = requestId;
  scope.child = undefined;
}

/** The fields every line of a request carries, in the order its child logger would write them. */
export function logBindings(c: Context<Env>): Record<string, unknown> {
  const { requestId } = c.get('logScope');
  return {
    httpRequestId: c.get('requestId'),
    ...callerBindings(c.get('caller')),
    ...(requestId === undefined ? {} : { requestId }),
  };
}

/** The request's logger: a child of the scope's carrying logBindings, made on first use. */
export function log(c: Context<Env>): Logger {
  const scope = c.get('logScope');
  const caller = c.get('caller');
  if (!scope.child || scope.childCaller !== caller) {
    scope.child = scope.logger.child(logBindings(c));
    scope.childCaller = caller;
  }
  return scope.child;
}
