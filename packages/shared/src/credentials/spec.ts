import { createPrivateKey, X509Certificate } from 'node:crypto';
import { z } from 'zod';
import { parseWith } from '../contract/issues.ts';
import { checkSigningSecrets, type SigningScheme, signingSchemeOf } from './signing.ts';

/**
 * What a named credential holds (all of it secret at rest): an OAuth2 client-credentials grant
 * (RFC 6749 §4.4), a client certificate for mTLS, an egress proxy of its own, request signing
 * secrets (`meta.signing.keyId` names the credential), or several of them.
 */
export const OAUTH2_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'] as const;

const httpUrl = (what: string) =>
  z.string().refine(
    (text) => {
      const url = URL.parse(text);
      return url !== null && (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
    },
    { error: `${what} must be an absolute http(s) URL` },
  );

const pem = (kind: 'certificate' | 'key') =>
  z.string().refine(
    (text) => {
      try {
        if (kind === 'certificate') new X509Certificate(text);
        else createPrivateKey(text);
        return true;
      } catch {
        return false;
      }
    },
    // Never echo the text: it may be a private key.
    { error: `is not a PEM ${kind === 'key' ? 'private key' : 'certificate'}` },
  );

const oauth2Schema = z.strictObject({
  tokenUrl: httpUrl('tokenUrl'),
  clientId: z.string().min(1),
  clientSecret: z.string().min(1),
  authMethod: z.enum(OAUTH2_AUTH_METHODS).default('client_secret_basic'),
  scope: z.string().min(1).optional(),
  audience: z.string().min(1).optional(),
});

const mtlsSchema = z.strictObject({
  cert: pem('certificate'),
  key: pem('key'),
  ca: pem('certificate').optional(),
});

/**
 * Signing secrets (./signing.ts): one, or several signing at once (a rotation: the receiver accepts
 * any one while it moves to the new secret), all of one scheme.
 */
export const MAX_SIGNING_SECRETS = 8;
const signingSchema = z
  .union([z.string(), z.array(z.string()).min(1).max(MAX_SIGNING_SECRETS)])
  .superRefine((value, ctx) => {
    const list = typeof value === 'string' ? [value] : value;
    // Never echo the text: it is a secret.
    for (const { index, message } of checkSigningSecrets(list))
      ctx.addIssue({ code: 'custom', message, path: typeof value === 'string' ? [] : [index] });
  });

export const CREDENTIAL_KINDS = ['oauth2', 'mtls', 'proxy', 'signing'] as const;
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number];

export const credentialSecretsSchema = z
  .strictObject({
    oauth2: oauth2Schema.optional(),
    mtls: mtlsSchema.optional(),
    proxy: httpUrl('proxy').optional(),
    signing: signingSchema.optional(),
  })
  .refine((s) => CREDENTIAL_KINDS.some((kind) => s[kind] !== undefined), {
    error: 'a credential needs at least one of oauth2, mtls, proxy, signing',
  });

export type CredentialSecrets = z.output<typeof credentialSecretsSchema>;
export type CredentialSecretsInput = z.input<typeof credentialSecretsSchema>;
export type OAuth2Secrets = NonNullable<CredentialSecrets['oauth2']>;
export type MtlsSecrets = NonNullable<CredentialSecrets['mtls']>;

/** A credential's signing secrets as a list (empty: it signs nothing). */
export function signingSecretsOf(secrets: CredentialSecrets): readonly string[] {
  const signing = secrets.signing;
  return signing === undefined ? [] : typeof signing === 'string' ? [signing] : signing;
}

/** Validates a credential's secrets; a ValidationError names the fields, never their values. */
export function parseCredentialSecrets(input: unknown): CredentialSecrets {
  return parseWith(credentialSecretsSchema, input);
}

/** What may be shown of a credential (`credentials list`, the admin API): no secret. */
export interface CredentialSummary {
  oauth2?: { tokenUrl: string; authMethod: string; scope?: string; audience?: string };
  mtls?: { subject: string; validTo: string; ca: boolean };
  /** The proxy's origin, without user or password. */
  proxy?: string;
  /** The scheme and how many secrets sign at once (2 during a rotation). */
  signing?: { scheme: SigningScheme; secrets: number };
}

/** What a credential holds, by its summary: e.g. `signing`, `oauth2+mtls`. */
export function kindsOf(summary: CredentialSummary): CredentialKind[] {
  return CREDENTIAL_KINDS.filter((kind) => summary[kind] !== undefined);
}

export function summaryOf(secrets: CredentialSecrets): CredentialSummary {
  const summary: CredentialSummary = {};
  if (secrets.oauth2) {
    const { tokenUrl, authMethod, scope, audience } = secrets.oauth2;
    const url = new URL(tokenUrl);
    summary.oauth2 = {
      tokenUrl: `${url.origin}${url.pathname}`,
      authMethod,
      ...(scope ? { scope } : {}),
      ...(audience ? { audience } : {}),
    };
  }
  if (secrets.mtls) {
    const cert = new X509Certificate(secrets.mtls.cert);
    summary.mtls = {
      subject: cert.subject.replaceAll('\n', ', '),
      validTo: cert.validTo,
      ca: !!secrets.mtls.ca,
    };
  }
  if (secrets.proxy) summary.proxy = new URL(secrets.proxy).origin;
  const signing = signingSecretsOf(secrets);
  const scheme = signingSchemeOf(signing);
  if (scheme) summary.signing = { scheme, secrets: signing.length };
  return summary;
}
