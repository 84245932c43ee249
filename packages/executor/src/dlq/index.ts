export {
  DEAD_LETTER_HEADERS,
  DEAD_LETTER_REASONS,
  type DeadLetter,
  type DeadLetterInput,
  deadLetterMessage,
  deadLetterRecord,
  MAX_DEAD_LETTER_BODY_BYTES,
  parseDeadLetter,
  replayEnvelope,
} from '@requester/shared';

/**
 * The dead-letter record of a request that failed for good (docs/architecture.md §5 "Exhausted / permanent"),
 * written to the DLQ topic next to its final result on `out`. The format is a public contract
 * (`contracts/dead-letter.schema.json`); its schema, parser and the builder of the Kafka message
 * live in `@requester/shared` (the router and the relay dead-letter records too). `requester dlq
 * list|replay` reads it back.
 */
