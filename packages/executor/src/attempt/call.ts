import { inSpan, tracingEnabled, untracedTraceparent } from '@requester/shared/tracing';
import type { CallOutcome } from '../http/index.ts';
import type { GateSpec } from './gate.ts';
import { DEFAULT_ARRIVAL_MARGIN_MS, settleSlots } from './gates/limit.ts';
import { reporter } from './report.ts';
import { clientSpanOptions, endClientSpan, spanTraceparent, withTraceparent } from './span.ts';

/**
 * The HTTP call, the end of the chain: the call the gates let through, with this attempt's
 * `traceparent`, then its report (report.ts). The decide rules (worker/decide.ts) turn the answer
 * into a result or a retry.
 */
export const call: GateSpec = {
  name: 'call',
  does: 'calls the target, then reports the answer to the pacer and the breaker',
  exits: [
    { when: '2xx, 3xx', becomes: 'result' },
    {
      when: '429, 408, 5xx, timeout, transport error, attempts left',
      becomes: 'retry after the backoff or `Retry-After` (`tryCount + 1`)',
    },
    { when: 'the same, no attempt left', becomes: 'result, dead letter `retries_exhausted`' },
    { when: 'other 4xx, SSRF refusal, answer over the size cap', becomes: 'result, dead letter `permanent`' },
    { when: 'the probe of a held origin failed', becomes: 'wait until its next probe (not an attempt)' },
  ],
  link(modules) {
    const { http, limiter } = modules;
    const marginMs = modules.limiterArrivalMarginMs ?? DEFAULT_ARRIVAL_MARGIN_MS;
    const report = reporter(modules);
    return async (attempt) => {
      const call = attempt.call;
      if (!call) throw new Error('the chain reached the call without building it (sign gate missing)');
      // Settled once the request is on the socket, not after the answer: other executors' takes
      // then count it by its send time as soon as possible (a pending slot counts until its budget).
      const sent = () => {
        if (attempt.reservations && limiter && !attempt.settled)
          attempt.settled = settleSlots(
            limiter,
            attempt.reservations,
            performance.now(),
            marginMs,
            attempt.log,
          );
      };
      const { traceparent } = attempt.envelope.meta;
      const outcome: CallOutcome = tracingEnabled()
        ? await inSpan(call.method, traceparent, clientSpanOptions(call), (span) =>
            http
              .call(withTraceparent(call, spanTraceparent(span, traceparent)), undefined, { sent })
              .then((outcome) => {
                endClientSpan(span, outcome);
                return outcome;
              }),
          )
        : // No span nobody would record: its contexts and closures cost every call.
          await http.call(withTraceparent(call, untracedTraceparent(traceparent)), undefined, { sent });
      attempt.answered();
      // Never handed whole to the socket: part of it may have left, so it counts as sent now.
      sent();
      return report(attempt, outcome);
    };
  },
};
