import { createPrivateKey, X509Certificate } from 'node:crypto';
import { z } from 'zod';
import { parseWith } from '../contract/issues.ts';

/**
 * What a named credential holds (all of it secret at rest): an OAuth2 client-credentials grant
 * (RFC 6749 §4.4), a client certificate for mTLS, an egress proxy of its own, or several of them.
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

export const credentialSecretsSchema = z
  .strictObject({
    oauth2: oauth2Schema.optional(),
    mtls: mtlsSchema.optional(),
    proxy: httpUrl('proxy').optional(),
  })
  .refine((s) => s.oauth2 !== undefined || s.mtls !== undefined || s.proxy !== undefined, {
    error: 'a credential needs at least one of oauth2, mtls, proxy',
  });

export type CredentialSecrets = z.output<typeof credentialSecretsSchema>;
export type CredentialSecretsInput = z.input<typeof credentialSecretsSchema>;
export type OAuth2Secrets = NonNullable<CredentialSecrets['oauth2']>;
export type MtlsSecrets = NonNullable<CredentialSecrets['mtls']>;

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
  return summary;
}
