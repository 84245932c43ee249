/** The relay: the outbox to `in`. */

import { goDuration, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const relayVariables = {
  relayWorkers: variable('RELAY_WORKERS', '2', positiveInt, 'concurrent outbox claimers per relay process'),
  relayBatch: variable('RELAY_BATCH', '500', positiveInt, 'outbox rows moved to Kafka per transaction'),
  relayStageAhead: variable(
    'RELAY_STAGE_AHEAD',
    '60s',
    goDuration,
    'how long before its due time an outbox row is moved to the Redis queue (through in), where it waits for its instant: many rows due at one instant (a "send at 09:00" campaign) are all staged by then instead of drained after it. Staged tasks count toward QUEUE_HIGH_WATERMARK, and a staged task of an ordered partition holds the later arrivals of its partition behind it from then on; 0 = a row moves when it is due',
  ),
};
