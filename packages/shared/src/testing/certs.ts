import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** PEM texts of a test PKI: a CA, a server certificate for 127.0.0.1/localhost, a client certificate. */
export interface TestPki {
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A client certificate signed by another CA: a server trusting `caCert` refuses it. */
  strangerCert: string;
  strangerKey: string;
}

/**
 * Makes a fresh PKI with `openssl` (EC P-256, valid for a day) in a temporary directory it then
 * removes. Certificates are made per test run, never committed.
 */
export function makeTestPki(): TestPki {
  const dir = mkdtempSync(path.join(tmpdir(), 'requester-pki-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const file = (name: string) => readFileSync(path.join(dir, name), 'utf8');
  try {
    const key = (name: string) => run('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', name);
    const ca = (name: string) => {
      key(`${name}.key`);
      run(
        'req',
        '-x509',
        '-new',
        '-key',
        `${name}.key`,
        '-subj',
        `/CN=${name}`,
        '-days',
        '1',
        '-out',
        `${name}.crt`,
      );
    };
    const leaf = (name: string, issuer: string, ext: string) => {
      key(`${name}.key`);
      run('req', '-new', '-key', `${name}.key`, '-subj', `/CN=${name}`, '-out', `${name}.csr`);
      writeFileSync(path.join(dir, `${name}.ext`), ext);
      run(
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        `${issuer}.crt`,
        '-CAkey',
        `${issuer}.key`,
        '-CAcreateserial',
        '-days',
        '1',
        '-extfile',
        `${name}.ext`,
        '-out',
        `${name}.crt`,
      );
    };
    ca('test-ca');
    ca('stranger-ca');
    leaf('server', 'test-ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
    leaf('client', 'test-ca', 'extendedKeyUsage=clientAuth\n');
    leaf('stranger', 'stranger-ca', 'extendedKeyUsage=clientAuth\n');
    return {
      caCert: file('test-ca.crt'),
      serverCert: file('server.crt'),
      serverKey: file('server.key'),
      clientCert: file('client.crt'),
      clientKey: file('client.key'),
      strangerCert: file('stranger.crt'),
      strangerKey: file('stranger.key'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
