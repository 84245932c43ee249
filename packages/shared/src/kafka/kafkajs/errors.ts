/**
 * Kafka errors as kafkajs raises them, in Requester's terms. kafkajs wraps a protocol error in its
 * own retry errors once its retries run out, so each check looks through the `cause` chain.
 */

/** What the checks read of a kafkajs error (or of anything in its cause chain). */
interface KafkaErrorLike {
  name?: unknown;
  message?: unknown;
  type?: unknown;
  retriable?: unknown;
}

/** `err` and its causes, at most 6 deep. */
function causes(err: unknown): KafkaErrorLike[] {
  const chain: KafkaErrorLike[] = [];
  for (let e = err; e instanceof Object && chain.length < 6; e = (e as { cause?: unknown }).cause)
    chain.push(e as KafkaErrorLike);
  return chain;
}

/** Whether Kafka said "try again" (kafkajs's `retriable`). */
export function isRetriableKafkaError(err: unknown): boolean {
  return causes(err).some((e) => e.retriable === true);
}

/**
 * Whether the broker refused a record as bigger than the topic's max.message.bytes (or its own
 * message.max.bytes): not retriable — the same record is refused again, whatever the wait.
 */
export function isMessageTooLargeError(err: unknown): boolean {
  return causes(err).some((e) => e.type === 'MESSAGE_TOO_LARGE');
}

/** Kafka error types that refuse one record (its size or format): the same record fails again. */
const RECORD_REFUSALS = new Set(['MESSAGE_TOO_LARGE', 'INVALID_RECORD', 'CORRUPT_MESSAGE']);

/** Whether Kafka refused a record itself (size, format), however kafkajs wrapped the refusal. */
export function isKafkaRecordRefusal(err: unknown): boolean {
  return causes(err).some((e) => typeof e.type === 'string' && RECORD_REFUSALS.has(e.type));
}

/** Whether this error (not its causes) is one of kafkajs's own. */
export function isKafkaClientError(e: { name?: unknown }): boolean {
  return typeof e.name === 'string' && e.name.startsWith('KafkaJS');
}

/** kafkajs's errors for a broker that could not be reached or did not answer in time. */
const UNREACHABLE = new Set([
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
  'KafkaJSBrokerNotFound',
]);

/**
 * Whether the broker could not be reached (refused, reset, closed, timed out), however kafkajs
 * wrapped it: an outage of the link, as opposed to a batch or a request Kafka answered with an error.
 */
export function isKafkaUnreachableError(err: unknown): boolean {
  return causes(err).some((e) => typeof e.name === 'string' && UNREACHABLE.has(e.name));
}

/**
 * What a Kafka error means for the operator: kafkajs names the SASL mechanism that failed, not
 * the system, and a refused login must not look like a broker that is merely down.
 */
export function explainKafkaError(err: unknown): string | undefined {
  for (const { name, message } of causes(err)) {
    if (
      name === 'KafkaJSSASLAuthenticationError' ||
      /SASL .*authentication failed/i.test(String(message ?? ''))
    )
      return `Kafka refused the credentials (KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD): ${String(message)}`;
  }
  return undefined;
}
