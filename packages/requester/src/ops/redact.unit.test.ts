import { encodeQueuedTask } from '@requester/shared';
import { describe, expect, it } from 'vitest';
import {
  isCredentialName,
  redactDeadLetter,
  redactEnvelope,
  redactQueuedPayload,
  redactResult,
  redactUrl,
} from './redact.ts';

describe('isCredentialName', () => {
  it('knows credential headers and parameters by their words, whatever the case and separators', () => {
    for (const name of [
      'Authorization',
      'proxy-authorization',
      'Cookie',
      'Set-Cookie',
      'X-Api-Key',
      'x-goog-api-key',
      'X-Auth-Token',
      'x-amz-security-token',
      'X-Amz-Signature',
      'X-Amz-Credential',
      'token',
      'api_key',
      'apikey',
      'apiKey',
      'key',
      'secret',
      'client_secret',
      'clientSecret',
      'password',
      'passwd',
      'signature',
      'sig',
      'access_token',
      'accesstoken',
      'refreshToken',
      'PHPSESSID',
      'session_id',
      'jwt',
    ])
      expect(isCredentialName(name), name).toBe(true);
  });

  it('leaves ordinary names alone', () => {
    for (const name of [
      'content-type',
      'accept',
      'x-request-id',
      'page',
      'limit',
      'q',
      'author',
      'sort',
      'id',
    ])
      expect(isCredentialName(name), name).toBe(false);
  });
});

describe('redactUrl', () => {
  it('hides the userinfo and the values of credential parameters, the rest as written', () => {
    expect(redactUrl('https://user:p%40ss@api.x.com:8443/a/b?api_key=K1&page=2&token=T#frag')).toBe(
      'https://[redacted]@api.x.com:8443/a/b?api_key=[redacted]&page=2&token=[redacted]#frag',
    );
    expect(redactUrl('https://ghp_abc@github.com/x')).toBe('https://[redacted]@github.com/x');
    expect(redactUrl('http://h/cb#access_token=AT&state=s')).toBe(
      'http://h/cb#access_token=[redacted]&state=s',
    );
    expect(redactUrl('http://h/p?X-Amz-Signature=abc&x=1')).toBe('http://h/p?X-Amz-Signature=[redacted]&x=1');
    expect(redactUrl('http://h/p?a%5Fkey=1')).toBe('http://h/p?a%5Fkey=[redacted]');
    expect(redactUrl('http://h/p')).toBe('http://h/p');
    expect(redactUrl('')).toBe('');
    expect(redactUrl('not a url with secret')).toBe('[redacted: 21 bytes]');
  });
});

describe('redactEnvelope, redactResult, redactDeadLetter, redactQueuedPayload', () => {
  const envelope = {
    request: {
      uri: 'http://u:pw@h/p?apikey=S',
      method: 'POST',
      headers: { Authorization: 'Bearer S', 'content-type': 'application/json', 'X-API-Key': 'S' },
      body: '{"password":"S"}',
    },
    meta: { requestId: 'r1', partition: '!p', proxyData: { token: 'S' }, client: 'billing' },
  };
  const shown = redactEnvelope(envelope);

  it('hides every secret of a request and keeps what explains it', () => {
    expect(JSON.stringify(shown)).not.toContain('S"');
    expect(shown).toEqual({
      request: {
        uri: 'http://[redacted]@h/p?apikey=[redacted]',
        method: 'POST',
        headers: {
          Authorization: '[redacted]',
          'content-type': 'application/json',
          'X-API-Key': '[redacted]',
        },
        body: '[redacted: 16 bytes]',
      },
      meta: { requestId: 'r1', partition: '!p', proxyData: '[redacted: 13 bytes]', client: 'billing' },
    });
    expect(envelope.request.headers.Authorization).toBe('Bearer S'); // not changed in place
  });

  it('hides the response body and credential headers of a result', () => {
    const result = {
      response: {
        status: 200,
        body: 'access_token=S',
        headers: { 'set-cookie': 'sid=S', 'x-target': 'test' },
      },
      meta: { requestId: 'r1', tryCount: 1, proxyData: 'S' },
    };
    expect(redactResult(result)).toEqual({
      response: {
        status: 200,
        body: '[redacted: 14 bytes]',
        headers: { 'set-cookie': '[redacted]', 'x-target': 'test' },
      },
      meta: { requestId: 'r1', tryCount: 1, proxyData: '[redacted: 3 bytes]' },
    });
  });

  it('hides a dead letter’s envelope, result and raw record value', () => {
    const raw = {
      key: Buffer.from('k').toString('base64'),
      value: Buffer.from('{"x":"S"}').toString('base64'),
    };
    const record = redactDeadLetter({
      record: raw,
      result: { response: { status: 400, body: '', headers: {} } },
    });
    expect(record).toEqual({
      record: { key: raw.key, value: '[redacted: 9 bytes]' },
      result: { response: { status: 400, body: '', headers: {} } },
    });
    expect(redactDeadLetter({ envelope }).envelope).toEqual(shown);
  });

  it('redacts the request riding in a queued task, and hides a payload that is no task', () => {
    const payload = encodeQueuedTask({
      ref: { topic: 'in', partition: 0, offset: '7' },
      requestId: 'r1',
      tryCount: 1,
      inline: { value: envelope },
    });
    expect(JSON.parse(redactQueuedPayload(payload))).toMatchObject({ r: 'r1', n: 1, v: shown });
    const bare = encodeQueuedTask({
      ref: { topic: 'in', partition: 0, offset: '7' },
      requestId: 'r1',
      tryCount: 0,
    });
    expect(redactQueuedPayload(bare)).toBe(bare);
    expect(redactQueuedPayload('garbage S')).toBe('[redacted: 9 bytes]');
  });
});
