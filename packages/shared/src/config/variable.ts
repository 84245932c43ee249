/** One configuration variable: env name, default (as text, the way a user would write it), schema, meaning. */

import type { z } from 'zod';

export interface VariableSpec {
  env: string;
  default: string | undefined;
  description: string;
  schema: z.ZodType;
}

export function variable<S extends z.ZodType>(
  env: string,
  defaultValue: string | undefined,
  schema: S,
  description: string,
) {
  return { env, default: defaultValue, schema, description } as const;
}
