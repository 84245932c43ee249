import { execFile } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { inspect, promisify } from 'node:util';
import { ConfigError, RequesterError } from '@requester/shared/errors';
import { describe, expect, it } from 'vitest';
import type { HttpCall } from '../http/index.ts';
import { idempotencyKey } from '../http/request.ts';
import { parseSigningKeys, signRequest, webhookId } from './index.ts';
import { verifyPlain, verifyStandardWebhook } from './verify.fixture.ts';

const whsec = () => `whsec_${randomBytes(24).toString('base64')}`;
const NOW = Date.UTC(2026, 4, 1, 12, 0, 0, 700);
const CALL: HttpCall = {
  method: 'POST',
  uri: 'https://partner.example/hooks',
  headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey('ord-42') },
  body: '{"order":42,"note":"naïve café ✓"}',
};

describe('Standard Webhooks signing', () => {
  it('verifies with an independent implementation of the spec (checked against the spec example)', () => {
    const example = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    expect(
      verifyStandardWebhook(
        'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        example,
        '{"test": 2432232314}',
        1614265330,
      ),
    ).toBe(true);

    const secret = whsec();
    const keys = parseSigningKeys(`partner=${secret}`);
    const signed = signRequest(CALL, { keyId: 'partner', requestId: 'ord-42' }, keys, NOW);
    expect(signed.headers).toMatchObject({
      'webhook-id': webhookId('ord-42'),
      'webhook-timestamp': String(Math.floor(NOW / 1000)),
      'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/),
      'content-type': 'application/json',
    });
    expect(verifyStandardWebhook(secret, signed.headers, CALL.body ?? '', NOW / 1000)).toBe(true);
    expect(signed.body).toBe(CALL.body);
    expect(CALL.headers['webhook-id']).toBeUndefined(); // the input call is left alone
  });

  it('signs with every secret of a rotated key id: any one of them verifies', () => {
    const [newer, older, other] = [whsec(), whsec(), whsec()];
    const keys = parseSigningKeys(` partner=${newer} ;\n partner=${older};`);
    const signed = signRequest(CALL, { keyId: 'partner', requestId: 'ord-42' }, keys, NOW);
    expect(signed.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(verifyStandardWebhook(newer, signed.headers, CALL.body ?? '', NOW / 1000)).toBe(true);
    expect(verifyStandardWebhook(older, signed.headers, CALL.body ?? '', NOW / 1000)).toBe(true);
    expect(verifyStandardWebhook(other, signed.headers, CALL.body ?? '', NOW / 1000)).toBe(false);
  });

  it('fails verification when the body, timestamp or id is tampered with, or the timestamp is old', () => {
    const secret = whsec();
    const keys = parseSigningKeys(`partner=${secret}`);
    const signed = signRequest(CALL, { keyId: 'partner', requestId: 'ord-42' }, keys, NOW);
    const body = CALL.body ?? '';
    const now = NOW / 1000;
    const ts = Number(signed.headers['webhook-timestamp']);
    expect(verifyStandardWebhook(secret, signed.headers, body.replace('42', '43'), now)).toBe(false);
    expect(
      verifyStandardWebhook(secret, { ...signed.headers, 'webhook-timestamp': String(ts + 1) }, body, now),
    ).toBe(false);
    expect(
      verifyStandardWebhook(secret, { ...signed.headers, 'webhook-id': webhookId('ord-43') }, body, now),
    ).toBe(false);
    expect(verifyStandardWebhook(secret, signed.headers, body, now + 10 * 60)).toBe(false);
  });

  it('keeps webhook-id across attempts and executors; each attempt carries its own timestamp', () => {
    const keys = parseSigningKeys(`partner=${whsec()}`);
    const first = signRequest(CALL, { keyId: 'partner', requestId: 'ord-42' }, keys, NOW);
    const retry = signRequest(CALL, { keyId: 'partner', requestId: 'ord-42' }, keys, NOW + 90_000);
    expect(retry.headers['webhook-id']).toBe(first.headers['webhook-id']);
    expect(Number(retry.headers['webhook-timestamp'])).toBe(Number(first.headers['webhook-timestamp']) + 90);
    expect(
      signRequest(CALL, { keyId: 'partner', requestId: 'ord-43' }, keys, NOW).headers['webhook-id'],
    ).not.toBe(first.headers['webhook-id']);
    expect(first.headers['webhook-id']).toBe(`msg_${CALL.headers['idempotency-key']}`);
  });

  it("gives two clients' requests of one requestId two message ids and Idempotency-Keys (the client namespace)", () => {
    const keys = parseSigningKeys(`partner=${whsec()}`);
    const idOf = (client?: string) =>
      signRequest(CALL, { keyId: 'partner', requestId: 'ord-42', client }, keys, NOW).headers['webhook-id'];
    expect(idOf('probe-a')).not.toBe(idOf('probe-b'));
    expect(idOf('probe-a')).toBe(webhookId('ord-42', 'probe-a'));
    expect(idOf(undefined)).toBe(webhookId('ord-42')); // no client: the id earlier versions sent
    expect(idempotencyKey('ord-42', 'probe-a')).not.toBe(idempotencyKey('ord-42'));
    // Without a client, the value of earlier versions (a retry across the upgrade keeps its key).
    expect(idempotencyKey('ord-42')).toBe('f0d7e6c5-edb1-5e5f-847d-8a0214c4cb93');
  });

  it('replaces signature headers sent by the caller, whatever their case', () => {
    const secret = whsec();
    const keys = parseSigningKeys(`partner=${secret}`);
    const forged = {
      ...CALL,
      headers: {
        ...CALL.headers,
        'Webhook-Signature': 'v1,forged',
        'WEBHOOK-ID': 'msg_x',
        'X-Signature': 'f',
      },
    };
    const signed = signRequest(forged, { keyId: 'partner', requestId: 'ord-42' }, keys, NOW);
    expect(Object.keys(signed.headers).sort()).toEqual(
      ['content-type', 'idempotency-key', 'webhook-id', 'webhook-signature', 'webhook-timestamp'].sort(),
    );
    expect(verifyStandardWebhook(secret, signed.headers, CALL.body ?? '', NOW / 1000)).toBe(true);
  });
});

describe('plain X-Signature signing', () => {
  it('is the hex HMAC-SHA256 of the body with hex, base64 or text secrets, verified with node:crypto', () => {
    const raw = randomBytes(32);
    const text = 'correct horse battery staple';
    const cases: Array<[string, Buffer]> = [
      [`hex:${raw.toString('hex')}`, raw],
      [`base64:${raw.toString('base64')}`, raw],
      [`text:${text}`, Buffer.from(text)],
    ];
    for (const [secret, key] of cases) {
      const signed = signRequest(
        CALL,
        { keyId: 'h1', requestId: 'r' },
        parseSigningKeys(`h1=${secret}`),
        NOW,
      );
      const expected = createHmac('sha256', key)
        .update(CALL.body ?? '')
        .digest('hex');
      expect(signed.headers['x-signature'], secret.split(':')[0]).toBe(expected);
      expect(signed.headers['webhook-signature']).toBeUndefined();
    }
    const empty = signRequest(
      { method: 'GET', uri: 'https://a.example/', headers: {} },
      { keyId: 'h1', requestId: 'r' },
      parseSigningKeys(`h1=hex:${raw.toString('hex')}`),
    );
    expect(empty.headers['x-signature']).toBe(createHmac('sha256', raw).update('').digest('hex'));
  });

  it('lists one signature per secret of a rotated key id, comma-separated', () => {
    const [a, b] = [randomBytes(32), randomBytes(32)];
    const keys = parseSigningKeys(`h1=hex:${a.toString('hex')};h1=base64:${b.toString('base64')}`);
    const signed = signRequest(CALL, { keyId: 'h1', requestId: 'r' }, keys, NOW);
    expect(signed.headers['x-signature']?.split(',')).toHaveLength(2);
    expect(verifyPlain(a, signed.headers, CALL.body ?? '')).toBe(true);
    expect(verifyPlain(b, signed.headers, CALL.body ?? '')).toBe(true);
    expect(verifyPlain(randomBytes(32), signed.headers, CALL.body ?? '')).toBe(false);
    expect(verifyPlain(a, signed.headers, `${CALL.body} `)).toBe(false);
  });
});

describe('signing keys', () => {
  it('refuses an unknown key id with a permanent invalid_request error', () => {
    const keys = parseSigningKeys(`partner=${whsec()}`);
    const attempt = () => signRequest(CALL, { keyId: 'nope', requestId: 'r' }, keys, NOW);
    expect(attempt).toThrow(RequesterError);
    expect(attempt).toThrow('unknown signing key id "nope"');
    try {
      attempt();
    } catch (err) {
      expect((err as RequesterError).code).toBe('invalid_request');
    }
    expect(() => signRequest(CALL, { keyId: 'partner', requestId: 'r' }, parseSigningKeys(''), NOW)).toThrow(
      /unknown signing key id/,
    );
  });

  it('reads several ids, schemes and rotations; shows only key ids when logged or serialized', () => {
    const secrets = [whsec(), whsec(), `hex:${randomBytes(16).toString('hex')}`];
    const keys = parseSigningKeys(`a.1=${secrets[0]};a.1=${secrets[1]};\n\nlegacy/x=${secrets[2]};`);
    expect(keys.ids).toEqual(['a.1', 'legacy/x']);
    expect(keys.scheme('a.1')).toBe('standard-webhooks');
    expect(keys.scheme('legacy/x')).toBe('hmac-sha256');
    expect(keys.scheme('zzz')).toBeUndefined();
    expect(JSON.stringify({ keys })).toBe('{"keys":{"keyIds":["a.1","legacy/x"]}}');
    const shown = `${inspect(keys, { showHidden: true, depth: 9 })} ${inspect({ keys })}`;
    for (const secret of secrets)
      expect(shown).not.toContain(secret.replace(/^\w+:|^whsec_/, '').slice(0, 12));
  });

  it('fails on bad entries naming SIGNING_KEYS, the entry and the problem, never the secret', () => {
    const shortSecret = `whsec_${randomBytes(12).toString('base64')}`;
    const cases: Array<[string, RegExp, string[]]> = [
      [
        'a=whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0;missing-equals-sign-s3cr3t',
        /entry 2 is not <keyId>=<secret>/,
        ['s3cr3t'],
      ],
      ['bad id=text:0123456789abcdef-s3cr3t', /entry 1: the key id is not/, ['s3cr3t']],
      [
        'k=plain-s3cr3t-0123456789',
        /entry 1 \(key id "k"\): the secret must start with whsec_, hex:, base64: or text:/,
        ['s3cr3t'],
      ],
      ['k=whsec_s3cr3t!!notbase64!!0123456789', /"k"\): the whsec_ secret is not base64/, ['s3cr3t']],
      ['k=base64:s3cr3t#0123456789abcdefgh', /the base64: secret is not base64/, ['s3cr3t']],
      [
        'k=hex:abcdef0123456789abcdef0123456789z',
        /the hex: secret is not an even number of hex digits/,
        ['abcdef0123'],
      ],
      [`k=${shortSecret}`, /the secret has 12 bytes; at least 16 are needed/, [shortSecret.slice(6)]],
      [
        `k=${whsec()};k=text:0123456789abcdef-s3cr3t`,
        /entry 2 \(key id "k"\): a key id signs with one scheme; this secret is hmac-sha256, an earlier one standard-webhooks/,
        ['s3cr3t'],
      ],
    ];
    for (const [text, message, secrets] of cases) {
      let error: unknown;
      try {
        parseSigningKeys(text);
      } catch (err) {
        error = err;
      }
      expect(error, text).toBeInstanceOf(ConfigError);
      const shown = `${(error as Error).message} ${JSON.stringify(error)} ${inspect(error)}`;
      expect((error as Error).message, text).toMatch(/^SIGNING_KEYS: /);
      expect((error as Error).message, text).toMatch(message);
      for (const secret of secrets) expect(shown, text).not.toContain(secret);
    }
  });
});

describe('secrets in logs', () => {
  it('never appear in the pino output of a full sign flow, nor in printed configuration', async () => {
    const whsecSecret = whsec();
    const rotated = whsec();
    const raw = randomBytes(32);
    const text = `text-secret-${randomBytes(8).toString('hex')}`;
    const env = {
      ...process.env,
      SIGNING_KEYS: `partner=${whsecSecret};partner=${rotated};legacy=hex:${raw.toString('hex')};txt=text:${text}`,
      LOG_LEVEL: 'trace',
    };
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [join(import.meta.dirname, 'sign-flow.fixture.ts')],
      { env, cwd: import.meta.dirname },
    );
    const output = `${stdout}\n${stderr}`;
    expect(output).toContain('"msg":"signed call"');
    expect(output).toContain('webhook-signature');
    expect(output).toContain('unknown signing key id \\"missing\\"');
    expect(output).toContain('bad SIGNING_KEYS');
    expect(output).toContain('"keys":{"keyIds":["partner","legacy","txt"]}');
    expect(output).toContain('"signingKeys":"[redacted]"');

    const forms = [whsecSecret, rotated].flatMap((s) => {
      const bytes = Buffer.from(s.slice(6), 'base64');
      return [s.slice(6), bytes.toString('hex'), bytes.toString('base64url')];
    });
    forms.push(raw.toString('hex'), raw.toString('hex').toUpperCase(), raw.toString('base64'), text);
    for (const form of forms) expect(output).not.toContain(form.slice(0, 16));
  });
});
