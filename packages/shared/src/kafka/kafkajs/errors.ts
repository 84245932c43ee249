/**
 * Kafka errors as kafkajs raises them, in Requester's terms. kafkajs wraps a protocol error in its
 * own retry errors once its retries run out, so each check looks through the `cause` chain.
 */

/** Whether Kafka said "try again" (kafkajs's `retriable`). */
export function isRetriableKafkaError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { retriable?: boolean }).retriable === true) return true;
  }
  return false;
}

/**
 * Whether the broker refused a record as bigger than the topic's max.message.bytes (or its own
 * message.max.bytes): not retriable — the same record is refused again, whatever the wait.
 */
export function isMessageTooLargeError(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { type?: string }).type === 'MESSAGE_TOO_LARGE') return true;
  }
  return false;
}

/**
 * What a Kafka error means for the operator: kafkajs names the SASL mechanism that failed, not
 * the system, and a refused login must not look like a broker that is merely down.
 */
export function explainKafkaError(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { name, message } = e as Error;
    if (name === 'KafkaJSSASLAuthenticationError' || /SASL .*authentication failed/i.test(message ?? ''))
      return `Kafka refused the credentials (KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD): ${message}`;
  }
  return undefined;
}
