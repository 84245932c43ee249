/**
 * The loader: the environment and the CLI flags, validated once against the schema.
 *
 * @module
 */

import { ConfigError } from '../errors/index.ts';
import { redactConfigValue } from './secret.ts';
import type { VariableSpec } from './variable.ts';
import { CONFIG_VARIABLES, type Config, type ConfigOverrides } from './variables/index.ts';

/**
 * Reads the configuration from `env` (default `process.env`) with `overrides` (CLI flags) on top.
 * Throws one ConfigError listing every bad variable by name.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, spec] of Object.entries(CONFIG_VARIABLES) as Array<[keyof Config, VariableSpec]>) {
    const raw = overrides[key] ?? nonEmpty(env[spec.env]) ?? spec.default;
    const parsed = spec.schema.safeParse(raw);
    if (parsed.success) values[key] = parsed.data;
    else
      problems.push(
        `${spec.env}=${JSON.stringify(redactConfigValue(raw))}: ${parsed.error.issues.map((i) => i.message).join(', ')}`,
      );
  }
  if (problems.length > 0)
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`, { problems });
  return values as Config;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
