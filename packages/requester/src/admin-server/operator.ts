import { RequesterError } from '@requester/shared';

/** An operator, from an API key with an admin scope. */
export interface Operator {
  name: string;
  admin: 'read' | 'write';
}

/**
 * Whether a view shows the requests' secrets: only when an operator asked, and only a write key
 * may (seeing a tenant's credentials is an act, journaled like a replay). A read key asking is
 * refused with `forbidden` (403).
 */
export function mayReveal(revealTo: Operator | undefined): boolean {
  if (!revealTo) return false;
  if (revealTo.admin !== 'write')
    throw new RequesterError('forbidden', 'revealing secrets needs an admin write key');
  return true;
}
