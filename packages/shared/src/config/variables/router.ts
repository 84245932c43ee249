/** The router: what it admits from `in`, body copies, backpressure. */

import { z } from 'zod';
import { bool, credentialNameList, goDuration } from '../values.ts';
import { variable } from '../variable.ts';

export const routerVariables = {
  kafkaEntry: variable(
    'KAFKA_ENTRY',
    'enforce',
    z.enum(['enforce', 'report']),
    'what the router does with a record written straight to in that claims a meta.client not allowed for Kafka entry: enforce answers it forbidden and dead-letters it; report lets it through and only logs and counts it (requester_router_refused_claims_total{action="reported"}), for the rolling upgrade from a version whose ingresses did not sign their records (docs/architecture.md §10)',
  ),
  kafkaAnonymousCredentials: variable(
    'KAFKA_ANONYMOUS_CREDENTIALS',
    '',
    credentialNameList,
    'credentials (comma-separated names: `meta.credentials` or `meta.signing.keyId`) that a record written straight to in may name without claiming a client, or under a client whose key does not list them: every producer the broker lets write in may then make calls with them. Any other credential on a record written straight to in needs its meta.client to be a key allowed for Kafka entry whose credentials scope lists it (the router answers the rest forbidden and dead-letters it, like a refused claim; KAFKA_ENTRY=report only logs them)',
  ),
  routerBodyCopies: variable(
    'ROUTER_BODY_COPIES',
    'true',
    bool,
    'a record of `in` of 8 KiB or more that its producer wrote in a record batch over 64 KiB with other records is copied by the router to KAFKA_TOPIC_BODIES, alone in its batch, and its task points there: the executor then reads that record, not the whole batch (docs/architecture.md §9). Upgrade executors before routers: an older executor would send such a task’s retries to the bodies topic',
  ),
  routerBreakerPauseAfter: variable(
    'ROUTER_BREAKER_PAUSE_AFTER',
    '0s',
    goDuration,
    "routers pause consuming in while a target origin's circuit breaker has been open longer than this; 0 = never (in is not split by origin: a pause holds back every origin)",
  ),
  routerBackpressureInterval: variable(
    'ROUTER_BACKPRESSURE_INTERVAL',
    '1s',
    goDuration.refine((ms) => ms > 0, 'must be a positive duration'),
    'how often routers sample the queue depth and open breakers for backpressure',
  ),
};
