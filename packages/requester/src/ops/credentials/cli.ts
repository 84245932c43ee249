import type { Argv } from 'yargs';
import { type ConfigFrom, EXIT_CODES_HELP, withJson } from '../../commands/common.ts';

/**
 * `requester credentials create|list|rotate|revoke|rewrap|set-origins`: named target credentials
 * in PostgreSQL (DATABASE_URL), sealed under CREDENTIALS_MASTER_KEY. Secrets come from files (or
 * stdin), never from the command line, and are never printed. The file options take their value
 * even when it is `-` (stdin): yargs would otherwise read a lone `-` as a stray argument.
 */
export function registerCredentialsCommands<T>(cli: Argv<T>, configFrom: ConfigFrom): void {
  cli.command(
    'credentials <action> [name]',
    'target credentials (OAuth2 client, client certificate, proxy, signing key): create, list, rotate, revoke, rewrap, import-signing, set-origins',
    (y) =>
      withJson(y)
        .positional('action', {
          choices: ['create', 'list', 'rotate', 'revoke', 'rewrap', 'import-signing', 'set-origins'] as const,
          describe:
            'create: a new credential; list: the live ones (no secret shown); rotate: new secrets for a ' +
            'credential (executors switch within CREDENTIALS_CACHE_TTL); revoke: its requests fail with ' +
            'credential_revoked from then on; rewrap: after putting a new master key first in ' +
            'CREDENTIALS_MASTER_KEY, re-wrap every data key with it; import-signing: each key id of the ' +
            'deprecated SIGNING_KEYS becomes a signing credential of that name (refused until set-origins); ' +
            'set-origins: name the origins a credential may be sent to (replacing its list), the upgrade ' +
            'of a credential created before origins existed',
        })
        .positional('name', {
          type: 'string',
          describe: 'create, rotate, revoke, set-origins: the credential name (meta.credentials)',
        })
        .option('origins', {
          type: 'string',
          requiresArg: true,
          describe:
            'create (required), set-origins: the origins the credential may be sent to, comma-separated ' +
            'scheme://host[:port] (https://api.partner.example, http://10.0.0.5:8080); any other target is refused',
        })
        .option('from-file', {
          type: 'string',
          requiresArg: true,
          describe: 'create, rotate: the credential as JSON ({oauth2, mtls, proxy}; - = stdin)',
        })
        .option('token-url', { type: 'string', describe: 'OAuth2 token endpoint (client credentials grant)' })
        .option('client-id', { type: 'string', describe: 'OAuth2 client id' })
        .option('client-secret-file', {
          type: 'string',
          requiresArg: true,
          describe: 'a file holding the OAuth2 client secret (- = stdin)',
        })
        .option('auth-method', {
          choices: ['client_secret_basic', 'client_secret_post'] as const,
          describe: 'how the client authenticates to the token endpoint (default client_secret_basic)',
        })
        .option('scope', { type: 'string', describe: 'OAuth2 scope asked for' })
        .option('audience', { type: 'string', describe: 'OAuth2 audience asked for' })
        .option('cert-file', { type: 'string', describe: 'mTLS: the client certificate (PEM)' })
        .option('key-file', { type: 'string', describe: 'mTLS: its private key (PEM)' })
        .option('ca-file', {
          type: 'string',
          describe: 'mTLS: CA certificates to trust for the target (PEM)',
        })
        .option('proxy-file', {
          type: 'string',
          requiresArg: true,
          describe: "a file holding this credential's own proxy URL (http://[user:pass@]host:port)",
        })
        .option('signing-secret-file', {
          type: 'string',
          requiresArg: true,
          describe:
            'a file holding request signing secrets (meta.signing.keyId names the credential), one a line: ' +
            'whsec_<base64> (Standard Webhooks) or hex:/base64:/text: (X-Signature); several lines all sign (rotation); - = stdin',
        })
        .option('all', { type: 'boolean', default: false, describe: 'list: revoked credentials too' })
        .example(
          '$0 credentials create partner-billing --token-url https://auth.partner.example/token --client-id requester --client-secret-file ./secret --scope payments --origins https://api.partner.example',
          'an OAuth2 client-credentials grant',
        )
        .example(
          '$0 credentials create bank --cert-file client.crt --key-file client.key --ca-file bank-ca.pem --origins https://api.bank.example:8443',
          'mTLS',
        )
        .example('$0 credentials rotate partner-billing --from-file new.json', '')
        .example(
          '$0 credentials create partner-x --origins https://api.x.example --from-file - < partner-x.json',
          'the credential as JSON on stdin: it never lands in a file',
        )
        .example(
          '$0 credentials set-origins partner-billing --origins https://api.partner.example,https://eu.partner.example',
          'where an existing credential may be sent',
        )
        .example(
          '$0 credentials create partner-hooks --signing-secret-file hooks.txt --origins https://hooks.customer.example',
          'a signing key: requests name it in meta.signing.keyId',
        )
        .example('SIGNING_KEYS=… $0 credentials import-signing', 'move SIGNING_KEYS into the store')
        .example('CREDENTIALS_MASTER_KEY=new:…,old:… $0 credentials rewrap', 'master key rotation')
        .epilogue(EXIT_CODES_HELP),
    async (argv) => (await import('./run.ts')).credentials(argv, configFrom),
  );
}
