/**
 * `meta` of the request envelope: how, when and under which policies to make the call.
 *
 * @module
 */

import { z } from 'zod';
import { deadlineField } from './deadline.ts';
import { boundedJson, printableId, rfc3339, strictObject, traceparent } from './fields.ts';
import {
  type ContractLimits,
  DESTINATION_NAME_PATTERN,
  MAX_CLIENT_LENGTH,
  MAX_ID_LENGTH,
  MAX_PRIORITY,
  MIN_PRIORITY,
} from './limits.ts';
import {
  cacheSchema,
  concurrencySchema,
  credentialsField,
  debounceSchema,
  limiterSchema,
  retrySchema,
  signingSchema,
  timeoutField,
} from './policies.ts';

function partitionField() {
  return printableId(
    MAX_ID_LENGTH,
    'Partition key, the client’s own: the requests of one client sharing it share a queue (another client’s same key is another queue). A leading `!` makes it ordered (no overtaking).',
  ).refine((partition) => partition !== '!', { error: 'an ordered partition needs a key after "!"' });
}

function clientField() {
  return printableId(
    MAX_CLIENT_LENGTH,
    'Who sent the request, echoed in the result. Over HTTP the ingress sets it to the name of the API key and refuses a caller-sent value; on Kafka it is whatever the producer writes (Requester does not authenticate producers: the broker ACLs on `in` decide who may write).',
  );
}

export function metaSchema(limits: ContractLimits) {
  return strictObject({
    requestId: printableId(
      MAX_ID_LENGTH,
      'Caller-chosen id, unique per task among the client’s own (another client may use the same id: it names another request); the Kafka key of the result on `out`.',
    ),
    traceparent: traceparent('W3C Trace Context traceparent, continued by the service.').optional(),
    partition: partitionField().optional(),
    priority: z
      .number()
      .int()
      .min(MIN_PRIORITY)
      .max(MAX_PRIORITY)
      .meta({
        description:
          'How urgent the request is among the client’s own, from -10 (lowest) to 10 (highest); default 0. Inside the client’s share of the queue its higher-priority requests start first; it never takes turns from other clients, an ordered partition keeps its order (its first request’s priority decides when it runs), and a low-priority request still runs under a constant stream of higher ones (aging).',
      })
      .optional(),
    sync: z.boolean().meta({ description: 'HTTP only: wait for the result and answer with it.' }).optional(),
    scheduled: rfc3339('Do not execute before this instant.').optional(),
    deadline: deadlineField().optional(),
    proxyData: boundedJson(
      limits.maxProxyDataBytes,
      'Any JSON, echoed in the result as the same JSON value.',
    ).optional(),
    limiter: limiterSchema.optional(),
    concurrency: concurrencySchema.optional(),
    debounce: debounceSchema.optional(),
    timeout: timeoutField.optional(),
    retry: retrySchema.optional(),
    cache: cacheSchema.optional(),
    signing: signingSchema.optional(),
    credentials: credentialsField.optional(),
    client: clientField().optional(),
    destination: z
      .string()
      .regex(DESTINATION_NAME_PATTERN, {
        error:
          "must be a destination name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
      })
      .meta({
        description:
          'Name of a destination defined by the operators (`requester destinations create`): `request.uri` is then a path relative to its base URL, and its headers, credential, rate limit and retry policy apply. A caller may ask for less (fewer retries, a shorter timeout, a lower rate), never for more: its own `limiter` applies beside the destination’s (a call is made only when both grant), its `credentials` give way to the destination’s. The result’s `meta.destination` says which version applied.',
        pattern: DESTINATION_NAME_PATTERN.source,
      })
      .optional(),
  }).meta({ title: 'RequestMeta', description: 'How, when and under which policies to make the call.' });
}
