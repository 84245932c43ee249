/**
 * Settings whose default depends on other settings.
 *
 * @module
 */

import { CONFIG_VARIABLES, type Config } from './variables/index.ts';

/** The routers' consumer group (KAFKA_ROUTER_GROUP, or the default derived from the deployment's topic). */
export function routerGroupOf(
  config: Pick<Config, 'kafkaRouterGroup' | 'kafkaClientId' | 'topicIn'>,
): string {
  if (config.kafkaRouterGroup) return config.kafkaRouterGroup;
  const base = `${config.kafkaClientId}-router`;
  return config.topicIn === CONFIG_VARIABLES.topicIn.default ? base : `${base}.${config.topicIn}`;
}

/** The topic of the routers' copies of big batched `in` records (KAFKA_TOPIC_BODIES, or `<KAFKA_TOPIC_IN>.bodies`). */
export function bodiesTopicOf(config: Pick<Config, 'topicBodies' | 'topicIn'>): string {
  return config.topicBodies ?? `${config.topicIn}.bodies`;
}
