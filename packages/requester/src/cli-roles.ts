import { UsageError } from '@requester/shared/errors';
import { ROLE_NAMES, type RoleName } from '@requester/shared/role/names';

/** Parses `--role a,b` / `all` into role names; a clear message names any unknown one. */
export function parseRoles(text: string): RoleName[] {
  const wanted = text
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  if (wanted.length === 0)
    throw new UsageError(`--role is empty: give one or more of ${ROLE_NAMES.join(', ')}, or all`);
  if (wanted.includes('all')) return [...ROLE_NAMES];
  const unknown = wanted.filter((r) => !(ROLE_NAMES as readonly string[]).includes(r));
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown role ${unknown.map((r) => `"${r}"`).join(', ')}: expected ${ROLE_NAMES.join(', ')} or all`,
    );
  }
  return [...new Set(wanted)] as RoleName[];
}
