import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPg } from '../testing/index.ts';
import { KafkaEntryClients } from './index.ts';

describe('KafkaEntryClients (PostgreSQL)', () => {
  let pg: Awaited<ReturnType<typeof testPg>>;
  beforeAll(async () => {
    pg = await testPg();
    const hash = Buffer.alloc(32);
    await pg.sql`insert into requester_api_keys (id, name, secret_hash, kafka_entry, credentials, deadline) values
      ('aaaaaaaaaaaa', 'jobs', ${hash}, true, ${['partner']}, '10s'),
      ('bbbbbbbbbbbb', 'web', ${hash}, false, null, '5s'),
      ('cccccccccccc', 'batch', ${hash}, true, null, null)`;
  });
  afterAll(() => pg.drop());

  it('answers the claimable clients’ credentials and default deadlines, from one cache', async () => {
    const clients = new KafkaEntryClients(pg.sql, { ttlMs: 60_000 });
    const names = ['jobs', 'web', 'batch', 'nobody'];
    expect(await clients.scopes(names)).toEqual(
      new Map<string, readonly string[]>([
        ['jobs', ['partner']],
        ['batch', []],
      ]),
    );
    // A key not allowed for Kafka entry gives no default to records claiming it.
    expect(await clients.deadlines(names)).toEqual(new Map([['jobs', '10s']]));
    await pg.sql`update requester_api_keys set deadline = '1m' where name = 'jobs'`;
    expect(await clients.deadlines(['jobs'])).toEqual(new Map([['jobs', '10s']])); // cached for ttlMs
    const fresh = new KafkaEntryClients(pg.sql, { ttlMs: 60_000 });
    expect(await fresh.deadlines(['jobs'])).toEqual(new Map([['jobs', '1m']]));
  });
});
