import type { Issue, Refusal } from './access.ts';

export const CLIENT_IS_OURS: Refusal = {
  status: 400,
  code: 'invalid_request',
  detail: 'meta.client: set by Requester from the API key; leave it out',
  issues: [{ path: 'meta.client', message: 'set by Requester from the API key; leave it out' }],
};

const UNAUTHORIZED_HEADERS = { 'WWW-Authenticate': 'Bearer realm="requester"' };
export const MISSING: Refusal = {
  status: 401,
  code: 'unauthorized',
  detail: 'an API key is required: send Authorization: Bearer rqk_… (see `requester keys create`)',
  headers: UNAUTHORIZED_HEADERS,
};
/** One answer for a malformed, unknown, wrong, revoked or expired key: none tells which. */
export const INVALID: Refusal = {
  status: 401,
  code: 'unauthorized',
  detail: 'the API key is not valid (unknown, revoked, or replaced by a rotation)',
  headers: { 'WWW-Authenticate': 'Bearer realm="requester", error="invalid_token"' },
};
export const KEYS_UNAVAILABLE: Refusal = {
  status: 503,
  code: 'dependency_unavailable',
  detail: 'API keys cannot be checked now (PostgreSQL does not answer); retry later',
  headers: { 'Retry-After': '5' },
};

/** A refusal of what the key's scopes do not allow, naming each field. */
export function forbidden(issues: Issue[]): Refusal {
  return {
    status: 403,
    code: 'forbidden',
    detail: issues.map((issue) => `${issue.path}: ${issue.message}`).join('; '),
    issues,
  };
}
