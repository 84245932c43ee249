import { describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import { parseDeadLetter, replayEnvelope } from './dead-letter.ts';
import { deadLetterJsonSchema, type JsonSchema, requestJsonSchema, resultJsonSchema } from './json-schema.ts';
import { attemptsInBudget, parseRequestEnvelope } from './request.ts';
import { buildResult } from './result.ts';
import { designRequestExample } from './testing/examples.ts';
import { validateJsonSchema } from './testing/mini-json-schema.ts';

function deadLetter(overrides: Record<string, unknown> = {}) {
  return {
    envelope: { ...designRequestExample(), tryCount: 2, createdAt: '2026-11-30T06:00:00Z', waitTime: 5 },
    result: buildResult({ requestId: 'ord-42-create', status: 503, body: 'down', tryCount: 5 }),
    reason: 'retries_exhausted',
    failedAt: '2026-11-30T06:05:00.000Z',
    source: { topic: 'requester.in', partition: 3, offset: '9007199254740993' },
    ...overrides,
  };
}

/** The DLQ schema with its `$ref`s to the request and result schemas resolved (the mini validator has no $ref). */
function resolvedSchema(): JsonSchema {
  const schema = deadLetterJsonSchema();
  const properties = schema.properties as Record<string, JsonSchema>;
  const bare = ({ $schema: _s, $id: _i, ...rest }: JsonSchema) => rest;
  return {
    ...schema,
    properties: { ...properties, envelope: bare(requestJsonSchema()), result: bare(resultJsonSchema()) },
  };
}

describe('dead-letter.schema.json', () => {
  it('points at the request and result schemas by $id', () => {
    const properties = deadLetterJsonSchema().properties as Record<string, JsonSchema>;
    expect(properties.envelope?.$ref).toBe('urn:requester:contract:request:v1');
    expect(properties.result?.$ref).toBe('urn:requester:contract:result:v1');
  });

  it('accepts a record the parser accepts, and refuses a missing reason', () => {
    expect(validateJsonSchema(deadLetter(), resolvedSchema())).toEqual([]);
    const { reason: _r, ...withoutReason } = deadLetter();
    expect(validateJsonSchema(withoutReason, resolvedSchema())).toEqual(['$.reason: required']);
  });
});

describe('parseDeadLetter', () => {
  it('reads JSON text, a Buffer or an object; unknown fields are tolerated', () => {
    const text = JSON.stringify({ ...deadLetter(), addedLater: true });
    for (const input of [text, Buffer.from(text), JSON.parse(text)]) {
      const record = parseDeadLetter(input);
      expect(record.envelope.meta.requestId).toBe('ord-42-create');
      expect(record.source?.offset).toBe('9007199254740993');
    }
  });

  it('names a bad field inside the envelope by its full path', () => {
    const bad = deadLetter();
    (bad.envelope.meta as Record<string, unknown>).requestId = '';
    expect(() => parseDeadLetter(bad)).toThrow(ValidationError);
    expect(() => parseDeadLetter(bad)).toThrow(/envelope\.meta\.requestId: must not be empty/);
  });

  it('names bad record fields', () => {
    expect(() => parseDeadLetter(deadLetter({ failedAt: 'yesterday', reason: 'Bad Reason' }))).toThrow(
      /reason: .*failedAt: invalid RFC 3339/s,
    );
  });
});

describe('replayEnvelope', () => {
  it('continues tryCount after the attempts made, starts a fresh budget there, and keeps the requestId', () => {
    const record = parseDeadLetter(deadLetter());
    const replay = replayEnvelope(record, { nowMs: Date.parse('2026-12-01T00:00:00Z') });
    expect(replay.meta).toEqual(record.envelope.meta);
    expect(replay.tryCount).toBe(5);
    expect(replay.retryBase).toBe(5);
    expect(attemptsInBudget(replay, 5)).toBe(0);
    expect(replay.createdAt).toBe('2026-12-01T00:00:00.000Z');
    expect(replay.waitTime).toBeUndefined();
    expect(parseRequestEnvelope(replay)).toEqual(replay); // a valid envelope for `in`
  });

  it('moves past the dead task id even when no attempt was counted', () => {
    const record = parseDeadLetter(
      deadLetter({ result: buildResult({ requestId: 'ord-42-create', status: 500, tryCount: 0 }) }),
    );
    expect(replayEnvelope(record).tryCount).toBe(3); // the dead task was ord-42-create:2
  });

  it('replaying a replayed request keeps growing: every task id is new', () => {
    const first = replayEnvelope(parseDeadLetter(deadLetter()));
    const again = parseDeadLetter(
      deadLetter({
        envelope: first,
        result: buildResult({ requestId: 'ord-42-create', status: 503, tryCount: 10 }),
      }),
    );
    expect(replayEnvelope(again)).toMatchObject({ tryCount: 10, retryBase: 10 });
  });

  it('a forced replay of a record replayed before moves past every id that replay could have used', () => {
    const record = parseDeadLetter(deadLetter());
    expect(replayEnvelope(record, { previousReplay: 5 })).toMatchObject({ tryCount: 106, retryBase: 106 });
  });
});
