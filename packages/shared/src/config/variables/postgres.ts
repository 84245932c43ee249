/** The PostgreSQL connection (outbox, keys, credentials). */

import { z } from 'zod';
import { goDuration, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const postgresVariables = {
  databaseUrl: variable(
    'DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/requester',
    z.string().min(1),
    'PostgreSQL URL (outbox); the database is created when missing',
  ),
  pgPoolMax: variable('PG_POOL_MAX', '10', positiveInt, 'PostgreSQL pool size'),
  pgStatementTimeout: variable('PG_STATEMENT_TIMEOUT', '10s', goDuration, 'bound on one SQL statement'),
};
