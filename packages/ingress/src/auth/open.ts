import type { RequestEnvelope } from '@requester/shared/contract';
import { type Access, type Issue, withoutMark } from './access.ts';
import { CLIENT_IS_OURS, forbidden } from './refusals.ts';

/**
 * AUTH=off: every caller is let in, reads every result, and no request carries a client. Its
 * records are not signed, so they are anonymous ones to the router: a credential may be named
 * only when `anonymousCredentials` (KAFKA_ANONYMOUS_CREDENTIALS) lists it, refused here (403)
 * rather than answered forbidden later. Undefined: no such check (tests of the API alone).
 */
export function openAccess(anonymousCredentials?: ReadonlySet<string>): Access {
  return {
    identify: async () => undefined,
    admit: async (_caller, envelope) => {
      if (envelope.meta.client !== undefined) return { ok: false, refusal: CLIENT_IS_OURS };
      const issues = anonymousCredentials ? anonymousIssues(envelope, anonymousCredentials) : [];
      if (issues.length > 0) return { ok: false, refusal: forbidden(issues) };
      return { ok: true, envelope: withoutMark(envelope) };
    },
    mayNotWait: () => undefined,
    takeRate: async () => undefined,
    bodyLimit: (_caller, serverMax) => serverMax,
    mayRead: () => true,
    mayReadClient: () => true,
  };
}

function anonymousIssues(envelope: RequestEnvelope, allowed: ReadonlySet<string>): Issue[] {
  const issues: Issue[] = [];
  for (const [path, name] of [
    ['meta.credentials', envelope.meta.credentials],
    ['meta.signing.keyId', envelope.meta.signing?.keyId],
  ] as const)
    if (name !== undefined && !allowed.has(name))
      issues.push({
        path,
        message: `with AUTH=off only the credentials of KAFKA_ANONYMOUS_CREDENTIALS may be used (${name} is not among them)`,
      });
  return issues;
}
