import type { Context, MiddlewareHandler } from 'hono';
import { requestHeader } from '../request/index.ts';
import { type Access, type Caller, decisions, type Refusal } from './access.ts';

/** The Hono middleware: identifies the caller (`c.var.caller`) or answers the refusal. */
export function authenticate<E extends { Variables: { caller?: Caller } }>(
  access: Access,
  render: (c: Context<E>, refusal: Refusal) => Response,
): MiddlewareHandler<E> {
  return async (c, next) => {
    const identified = await access.identify(requestHeader(c, 'authorization'));
    if (identified && 'status' in identified) {
      decisions.inc({ client: '', outcome: identified.code });
      return render(c, identified);
    }
    // The API's request log reads the caller from here (callerBindings): its lines name the client.
    if (identified) c.set('caller', identified);
    await next();
  };
}

/** The log bindings of a caller (merged into the role's logger once the role is known). */
export function callerBindings(caller: Caller | undefined): { client?: string } {
  return caller ? { client: caller.name } : {};
}
