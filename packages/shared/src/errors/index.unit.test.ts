import { describe, expect, it } from 'vitest';
import { isOutage, RequesterError, UsageError, ValidationError } from './index.ts';

/** Errors as the clients raise them (names, codes and shapes of kafkajs, postgres.js, ioredis, Node). */
function like(name: string, fields: Record<string, unknown>, cause?: unknown): Error {
  const err = Object.assign(new Error(String(fields.message ?? name), cause ? { cause } : undefined), fields);
  err.name = name;
  return err;
}

describe('isOutage', () => {
  const outages: Array<[string, unknown]> = [
    ['a produce that timed out', new RequesterError('dependency_unavailable', 'produce timed out')],
    [
      'a Kafka broker away',
      like('KafkaJSConnectionError', { message: 'Connection error: connect ECONNREFUSED' }),
    ],
    [
      'kafkajs retries exhausted',
      like(
        'KafkaJSNumberOfRetriesExceeded',
        {},
        like('KafkaJSProtocolError', { type: 'NOT_LEADER_FOR_PARTITION' }),
      ),
    ],
    ['PostgreSQL shutting down (57P01)', like('PostgresError', { severity: 'FATAL', code: '57P01' })],
    ['a PostgreSQL read-only standby (25006)', like('PostgresError', { severity: 'ERROR', code: '25006' })],
    [
      'postgres.js losing its connection',
      like('Error', { code: 'CONNECTION_CLOSED', message: 'write CONNECTION_CLOSED' }),
    ],
    [
      'Redis refusing connections',
      like('Error', { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:6379' }),
    ],
    ['an ioredis command timeout', like('Error', { message: 'Command timed out' })],
    ['ioredis with the connection closed', like('Error', { message: 'Connection is closed.' })],
    ['a Redis Cluster slot moved (a failover)', like('ReplyError', { message: 'MOVED 5408 127.0.0.1:7343' })],
    [
      'a Redis Cluster down during a failover',
      like('ReplyError', { message: 'CLUSTERDOWN The cluster is down' }),
    ],
    [
      'ioredis out of cluster redirections',
      like('Error', {
        message: 'Too many Cluster redirections. Last error: ReplyError: CLUSTERDOWN The cluster is down',
      }),
    ],
    [
      'Redis loading its data',
      like('ReplyError', { message: 'LOADING Redis is loading the dataset in memory' }),
    ],
    [
      'Redis out of memory',
      like('ReplyError', { message: 'OOM command not allowed when used memory > maxmemory' }),
    ],
    [
      'a wrapped outage',
      new RequesterError('internal', 'x', { cause: like('Error', { code: 'ECONNRESET' }) }),
    ],
  ];
  const refusals: Array<[string, unknown]> = [
    ['a contract violation', new ValidationError([{ path: 'meta.scheduled', message: 'before 1970' }])],
    [
      'the queue refusing a task',
      new RequesterError('invalid_request', 'queue task "x": dueAt must be an integer epoch ms'),
    ],
    ['a payload too large', new RequesterError('payload_too_large', 'payload of 70000 bytes exceeds 65536')],
    ['a NUL in a PostgreSQL text (22021)', like('PostgresError', { severity: 'ERROR', code: '22021' })],
    ['a PostgreSQL constraint (23502)', like('PostgresError', { severity: 'ERROR', code: '23502' })],
    [
      'a record too large for Kafka',
      like('KafkaJSNumberOfRetriesExceeded', {}, like('KafkaJSProtocolError', { type: 'MESSAGE_TOO_LARGE' })),
    ],
    [
      'a Lua script refusing its arguments',
      like('ReplyError', { message: 'ERR Error running script: bad argument' }),
    ],
    ['a bug on strange input', new TypeError("Cannot read properties of undefined (reading 'meta')")],
    ['a thrown string', 'boom'],
  ];
  it.each(outages)('%s is an outage', (_, err) => expect(isOutage(err)).toBe(true));
  it.each(refusals)('%s is a refusal of the data', (_, err) => expect(isOutage(err)).toBe(false));
});

describe('UsageError', () => {
  it('is a RequesterError with its own code, so the CLI tells it apart (exit code 2)', () => {
    const err = new UsageError('retry needs task ids or --all');
    expect(err).toBeInstanceOf(RequesterError);
    expect(err.toJSON()).toEqual({ code: 'invalid_usage', message: 'retry needs task ids or --all' });
    expect(err.name).toBe('UsageError');
  });
});
