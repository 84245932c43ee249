import { UsageError } from '@requester/shared';
import { describe, expect, it } from 'vitest';
import { secretsFrom } from './index.ts';

const files: Record<string, string> = {
  'spec.json': JSON.stringify({
    oauth2: { tokenUrl: 'https://a.test/token', clientId: 'x', clientSecret: 'old' },
  }),
  secret: 'new-secret\n',
  'client.crt': 'CERT',
  'client.key': 'KEY',
  proxy: 'http://user:pass@proxy.test:3128\n',
  'bad.json': '{"oauth2": {"clientSecret": "s3cr3t"',
};
const read = (file: string) => {
  const text = files[file];
  if (text === undefined) throw new UsageError(`cannot read ${file}`);
  return text;
};

describe('secretsFrom (the CLI gathers a credential from files)', () => {
  it('merges the flags over --from-file, reading secrets from files and trimming the one-line ones', () => {
    expect(
      secretsFrom(
        {
          fromFile: 'spec.json',
          clientSecretFile: 'secret',
          scope: 'pay',
          certFile: 'client.crt',
          keyFile: 'client.key',
          proxyFile: 'proxy',
        },
        read,
      ),
    ).toEqual({
      oauth2: { tokenUrl: 'https://a.test/token', clientId: 'x', clientSecret: 'new-secret', scope: 'pay' },
      mtls: { cert: 'CERT', key: 'KEY' },
      proxy: 'http://user:pass@proxy.test:3128',
    });
  });

  it('refuses a file that is not JSON without quoting it', () => {
    expect(() => secretsFrom({ fromFile: 'bad.json' }, read)).toThrow(/bad\.json is not a JSON document/);
    try {
      secretsFrom({ fromFile: 'bad.json' }, read);
    } catch (err) {
      expect((err as Error).message).not.toContain('s3cr3t');
    }
  });
});
