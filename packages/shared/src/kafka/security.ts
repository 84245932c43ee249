import { readFileSync } from 'node:fs';
import type { Config } from '../config/index.ts';
import { ConfigError } from '../errors/index.ts';

export type SaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

export interface KafkaSecurity {
  /** TLS to the brokers: `true` trusts the system CAs, `{ ca }` these PEM certificates. */
  ssl?: boolean | { ca: string[] };
  sasl?: { mechanism: SaslMechanism; username: string; password: string };
}

/**
 * TLS and SASL of every Kafka client of a process, from KAFKA_SSL, KAFKA_SSL_CA and KAFKA_SASL_*.
 * A SASL mechanism without its username and password is a configuration error (named), not a
 * broker that refuses every connection later.
 */
export function kafkaSecurityFrom(config: Config): KafkaSecurity {
  const security: KafkaSecurity = {};
  if (config.kafkaSslCa) {
    try {
      security.ssl = { ca: [readFileSync(config.kafkaSslCa, 'utf8')] };
    } catch (err) {
      throw new ConfigError(`KAFKA_SSL_CA=${config.kafkaSslCa}: ${(err as Error).message}`);
    }
  } else if (config.kafkaSsl) security.ssl = true;
  const mechanism = config.kafkaSaslMechanism;
  if (mechanism) {
    const username = config.kafkaSaslUsername;
    const password = config.kafkaSaslPassword?.reveal();
    if (!username || !password)
      throw new ConfigError(
        `KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD`,
      );
    security.sasl = { mechanism, username, password };
  }
  return security;
}
