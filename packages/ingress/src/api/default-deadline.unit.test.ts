import { createHash } from 'node:crypto';
import { parseDestinationSpec } from '@requester/shared/destinations';
import { describe, expect, it } from 'vitest';
import { silent } from '../../test/kit.fixture.ts';
import { KeyAccess } from '../auth/index.ts';
import { DestinationDoor } from '../destinations/index.ts';
import type { KeyRecord } from '../keys/index.ts';
import { createApi } from './index.ts';

const SECRET = 'D'.repeat(43);
const TOKEN = `rqk_0123456789ab_${SECRET}`;

/** AUTH=on with one key, `quotes`, whose requests default to a 30 s deadline. */
function access(deadline: string | undefined = '30s') {
  const record: KeyRecord = {
    id: '0123456789ab',
    name: 'quotes',
    secretHash: createHash('sha256').update(SECRET).digest(),
    sync: false,
    schedule: true,
    kafkaEntry: false,
    ...(deadline ? { deadline } : {}),
    createdAt: new Date(0),
  };
  return new KeyAccess({
    find: async (id) => (id === record.id ? record : undefined),
    cacheTtlMs: 60_000,
    horizonMs: 60_000,
    limiter: () => {
      throw new Error('no rate here');
    },
  });
}

/** One destination, `partner`, whose requests default to a 10 s deadline. */
const door = new DestinationDoor({
  current: async (name) =>
    name === 'partner'
      ? {
          name,
          version: 1,
          spec: parseDestinationSpec({ baseUrl: 'https://partner.example', deadline: '10s' }),
        }
      : undefined,
});

/** The copy written to `in` of a request with these `meta` fields (202 expected). */
async function sentCopy(
  meta: Record<string, unknown>,
  uri = 'https://example.test/x',
  keyDeadline?: string,
): Promise<{ createdAt: string; meta: { deadline?: string } }> {
  const sent: string[] = [];
  const app = createApi(
    { submit: async (_key, value) => void sent.push(value) },
    {
      maxBodyBytes: 64 * 1024,
      syncTimeoutMs: 1_000,
      longPollMaxMs: 5_000,
      access: access(keyDeadline),
      destinations: door,
    },
    silent,
  );
  const body = JSON.stringify({ request: { uri }, meta: { requestId: 'd-1', ...meta } });
  const res = await app.request('/request', {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
  });
  expect(res.status, await res.clone().text()).toBe(202);
  return JSON.parse(sent[0] ?? '{}');
}

const after = (copy: { createdAt: string; meta: { deadline?: string } }) =>
  Date.parse(copy.meta.deadline ?? '') - Date.parse(copy.createdAt);

describe('the operator’s default deadline', () => {
  it('gives a request of a key with a default, and none of its own, the key’s deadline from acceptance', async () => {
    expect(after(await sentCopy({}))).toBe(30_000);
  });

  it('leaves a request its own deadline, later or not', async () => {
    expect(after(await sentCopy({ deadline: '5m' }))).toBe(300_000);
  });

  it('counts from a scheduled instant, so that a request scheduled ahead is not refused', async () => {
    const scheduled = new Date(Date.now() + 3_600_000).toISOString();
    const copy = await sentCopy({ scheduled });
    expect(Date.parse(copy.meta.deadline ?? '') - Date.parse(scheduled)).toBe(30_000);
  });

  it('takes the destination’s default, or the earlier of the key’s and the destination’s', async () => {
    expect(after(await sentCopy({ destination: 'partner' }, '/v1/quote'))).toBe(10_000);
    expect(after(await sentCopy({ destination: 'partner' }, '/v1/quote', '5s'))).toBe(5_000);
    expect((await sentCopy({}, 'https://example.test/x', '')).meta.deadline).toBeUndefined();
  });
});
