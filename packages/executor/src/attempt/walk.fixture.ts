import { parseRequestEnvelope, type RequestEnvelope } from '@requester/shared/contract';
import type { DestinationGates } from '@requester/shared/destinations';
import { createLogger } from '@requester/shared/log';
import type { Granted } from '../bulkhead/index.ts';
import type { CallOutcome, HttpClient } from '../http/index.ts';
import { Attempt } from './attempt.ts';
import { compose, type Link } from './compose.ts';
import type { GateSpec } from './gate.ts';
import type { PolicyModules } from './modules.ts';
import type { CallOrRefusal } from './outcome.ts';

/** The answer of the stand-in for the rest of the chain. */
export const ANSWER: CallOutcome = {
  kind: 'response',
  status: 200,
  headers: {},
  body: 'ok',
  durationNs: 1e6,
};

const log = createLogger({ level: 'silent' });
let made = 0;

/** A request to `uri` (a port nothing listens on: no gate test calls a target). */
export function request(
  meta: Record<string, unknown> = {},
  uri = 'http://127.0.0.1:9/hook',
): RequestEnvelope {
  made += 1;
  return parseRequestEnvelope({
    request: { uri, method: 'POST', body: '{}' },
    meta: { requestId: `gate-${made}`, ...meta },
  });
}

/**
 * One gate, built from `modules`, followed by a stand-in for the rest of the chain that notes each
 * attempt reaching it and answers with `rest` (default ANSWER at once).
 */
export function walkThrough(
  gate: GateSpec,
  modules: Partial<PolicyModules> = {},
  rest: (attempt: Attempt) => Promise<CallOrRefusal> = () => Promise.resolve(ANSWER),
) {
  const reached: Attempt[] = [];
  const end: Link<Attempt, CallOrRefusal> = (attempt) => {
    reached.push(attempt);
    return rest(attempt);
  };
  const all: PolicyModules = { http: {} as HttpClient, retryAfterMaxMs: 60_000, ...modules };
  const chain = compose([gate.link(all), end]);
  return {
    reached,
    /** One attempt of `envelope` through the gate; resolves to what the gate answered, and the attempt. */
    async run(
      envelope: RequestEnvelope,
      options: { pacedAt?: number; handed?: Granted; destination?: DestinationGates } = {},
    ) {
      const attempt = new Attempt(
        chain,
        envelope,
        1,
        options.pacedAt,
        log,
        options.handed,
        options.destination,
      );
      const answer = await attempt.next();
      return { answer, attempt };
    },
  };
}
