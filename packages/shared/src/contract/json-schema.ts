import { z } from 'zod';
import { destinationSpecSchema } from '../destinations/spec.ts';
import { journalEventSchema } from '../journal/event.ts';
import { deadLetterSchema } from './dead-letter.ts';
import { requestEnvelopeSchema } from './request.ts';
import { resultEnvelopeSchema } from './result.ts';

/**
 * JSON Schema (draft 2020-12) of the contract, generated from the very zod schemas that validate
 * input, so the published files cannot drift from the validator. Producers in any language use
 * `contracts/*.schema.json`; the HTTP ingress builds its OpenAPI 3.1 document from
 * `openApiComponents()`.
 */

export type JsonSchema = Record<string, unknown>;

export const REQUEST_SCHEMA_ID = 'urn:requester:contract:request:v1';
export const RESULT_SCHEMA_ID = 'urn:requester:contract:result:v1';
export const DEAD_LETTER_SCHEMA_ID = 'urn:requester:contract:dead-letter:v1';
export const EVENT_SCHEMA_ID = 'urn:requester:contract:event:v1';

/**
 * `io: 'input'` describes what a producer may send: fields with defaults are optional, and
 * non-strict objects (the result) do not forbid fields added later.
 */
function toJsonSchema(schema: z.ZodType): JsonSchema {
  return z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as JsonSchema;
}

function withId(id: string, schema: JsonSchema): JsonSchema {
  const { $schema, ...rest } = schema;
  return { $schema, $id: id, ...rest };
}

export function requestJsonSchema(): JsonSchema {
  return withId(REQUEST_SCHEMA_ID, toJsonSchema(requestEnvelopeSchema));
}

/** A destination's spec as the admin API takes it (`{name, spec}`): its OpenAPI body. */
export function destinationSpecJsonSchema(): JsonSchema {
  const { $schema: _, ...schema } = toJsonSchema(destinationSpecSchema);
  return schema;
}

export function resultJsonSchema(): JsonSchema {
  return withId(RESULT_SCHEMA_ID, toJsonSchema(resultEnvelopeSchema));
}

/**
 * The DLQ record. Its `envelope` and `result` point at the request and result schemas by `$id`
 * instead of repeating them (load the three files into one validator).
 */
export function deadLetterJsonSchema(): JsonSchema {
  const schema = withId(DEAD_LETTER_SCHEMA_ID, toJsonSchema(deadLetterSchema));
  const properties = schema.properties as Record<string, JsonSchema>;
  for (const [name, id] of [
    ['envelope', REQUEST_SCHEMA_ID],
    ['result', RESULT_SCHEMA_ID],
  ] as const) {
    properties[name] = { $ref: id, description: properties[name]?.description };
  }
  return schema;
}

/** A record of the task journal (KAFKA_TOPIC_EVENTS). */
export function eventJsonSchema(): JsonSchema {
  return withId(EVENT_SCHEMA_ID, toJsonSchema(journalEventSchema));
}

export interface ContractFile {
  /** Relative to the repository's `contracts/` folder. */
  fileName: string;
  text: string;
}

/** The checked-in files, byte for byte (2-space JSON, trailing newline). */
export function contractFiles(): ContractFile[] {
  return [
    { fileName: 'request.schema.json', text: `${JSON.stringify(requestJsonSchema(), null, 2)}\n` },
    { fileName: 'result.schema.json', text: `${JSON.stringify(resultJsonSchema(), null, 2)}\n` },
    { fileName: 'dead-letter.schema.json', text: `${JSON.stringify(deadLetterJsonSchema(), null, 2)}\n` },
    { fileName: 'event.schema.json', text: `${JSON.stringify(eventJsonSchema(), null, 2)}\n` },
  ];
}

/** OpenAPI 3.1 `components` (Schema Objects are JSON Schema 2020-12, so no conversion is needed). */
export function openApiComponents(): {
  schemas: Record<'RequestEnvelope' | 'ResultEnvelope' | 'JournalEvent', JsonSchema>;
} {
  const bare = (schema: JsonSchema): JsonSchema => {
    const { $schema: _schema, $id: _id, ...rest } = schema;
    return rest;
  };
  return {
    schemas: {
      RequestEnvelope: bare(requestJsonSchema()),
      ResultEnvelope: bare(resultJsonSchema()),
      JournalEvent: bare(eventJsonSchema()),
    },
  };
}
