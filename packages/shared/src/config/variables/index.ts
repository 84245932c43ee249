/**
 * The one configuration schema, composed from one file per area. The README table lists the
 * variables in this order.
 *
 * @module
 */

import type { z } from 'zod';
import type { VariableSpec } from '../variable.ts';
import { adminVariables } from './admin.ts';
import { credentialsVariables } from './credentials.ts';
import { executorVariables } from './executor.ts';
import { ingressVariables } from './ingress.ts';
import { kafkaVariables } from './kafka.ts';
import { observabilityVariables } from './observability.ts';
import { policiesVariables } from './policies.ts';
import { postgresVariables } from './postgres.ts';
import { queueVariables } from './queue.ts';
import { redisVariables } from './redis.ts';
import { relayVariables } from './relay.ts';
import { routerVariables } from './router.ts';
import { syncVariables } from './sync.ts';
import { targetVariables } from './target.ts';

/** Every setting: env name, default (as text, the way a user would write it), meaning. */
export const CONFIG_VARIABLES = {
  ...observabilityVariables,
  ...kafkaVariables,
  ...routerVariables,
  ...redisVariables,
  ...queueVariables,
  ...postgresVariables,
  ...ingressVariables,
  ...adminVariables,
  ...executorVariables,
  ...targetVariables,
  ...policiesVariables,
  ...credentialsVariables,
  ...syncVariables,
  ...relayVariables,
} satisfies Record<string, VariableSpec>;

type Variables = typeof CONFIG_VARIABLES;
export type Config = { [K in keyof Variables]: z.output<Variables[K]['schema']> };
export type ConfigOverrides = Partial<Record<keyof Variables, string>>;
