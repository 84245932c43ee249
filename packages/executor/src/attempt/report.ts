import { type CallReport, type RecordOutcome, signalKind } from '@requester/policies';
import type { CallOutcome } from '../http/index.ts';
import { destinationLabel, executorMetrics as metrics, originLabel, outcomeLabel } from '../metrics.ts';
import { batched } from '../worker/batch.ts';
import { breakerFailure, heldProbeStep, optsOut } from '../worker/decide.ts';
import type { Attempt } from './attempt.ts';
import { journalAttempt, journalHold, journalThrottled } from './journal.ts';
import type { PolicyModules } from './modules.ts';
import { type CallOrRefusal, refusal } from './outcome.ts';

type OriginReport = CallReport & { origin: string };

/** What a report does with the target's answer, built once per executor. */
export type Report = (attempt: Attempt, outcome: CallOutcome) => Promise<CallOrRefusal>;

/**
 * The answer told to those who learn from it: the journal, the metrics, the origin's stats, its
 * pacer (every answer, unless its destination switched pacing off), and its breaker (the admission
 * the breaker gate took: the origin's, or the destination's own). A 429, or a 503
 * with `Retry-After`, is a success for the breaker: the target is up and says when to come back.
 */
export function reporter(modules: PolicyModules): Report {
  const { breaker, pacer, originStats, journal } = modules;
  const optOutHonoured = modules.optOut === true;
  // The answers of a lease batch reach the breaker together: one round trip per batch.
  const record =
    breaker && batched((reports: OriginReport[]): Promise<RecordOutcome[]> => breaker.recordMany(reports));
  return async (attempt, outcome) => {
    const { envelope, origin, admission, tryCount, log } = attempt;
    // The probe of a held origin: its failure is no attempt of the request (see heldProbeStep).
    const heldProbe =
      admission?.admitted === true &&
      (admission.probe || admission.callerProbe === true) &&
      admission.held !== undefined;
    journalAttempt(journal, envelope, tryCount, outcome, heldProbe);
    const label = outcomeLabel(outcome);
    const seconds = outcome.durationNs / 1e9;
    const originName = originLabel.of(origin);
    metrics.httpSeconds.observe({ outcome: label }, seconds);
    metrics.originSeconds.observe({ origin: originName }, seconds);
    metrics.originCalls.inc({ origin: originName, outcome: label });
    if (attempt.destination) {
      const destination = destinationLabel.of(attempt.destination.name);
      metrics.destinationCalls.inc({ destination, outcome: label });
      metrics.destinationSeconds.observe({ destination }, seconds);
    }
    originStats?.observe(
      origin,
      outcome.kind === 'response' && outcome.status < 500 && outcome.status !== 429,
      outcome.durationNs / 1e6,
    );
    if (outcome.kind === 'failure') log.warn({ err: outcome.error, tryCount }, 'call to the target failed');
    else log.debug({ status: outcome.status, tryCount }, 'target answered');
    const failed = breakerFailure(outcome);
    const optOut = optOutHonoured && optsOut(outcome);
    // A destination with pacing off teaches the origin's pace nothing: its calls did not follow it.
    const reported = attempt.paced
      ? pacer?.report(origin, outcome, outcome.durationNs, attempt.slot, attempt.identity)
      : undefined;
    const breakerKey = attempt.breakerKey;
    const settings = attempt.destination?.breaker;
    const [, recorded] = await Promise.all([
      attempt.settled,
      record && admission?.admitted
        ? record({ origin: breakerKey, ...admission, success: !failed, optOut, settings })
        : undefined,
      // Only a slow-down or an overload can be journalled as throttling, and only it is reported
      // at once: any other answer goes with its origin's next batch, not waited for.
      reported && signalKind(outcome, Date.now()) !== 'ok'
        ? reported.then((report) => journalThrottled(journal, envelope, report))
        : undefined,
    ]);
    if (recorded?.change) journalHold(journal, envelope, breakerKey, recorded.change);
    if (heldProbe && failed && recorded?.held && recorded.retryAtMs !== undefined) {
      log.info({ origin: breakerKey }, 'the probe of a held origin failed: the task waits for the next one');
      return refusal(heldProbeStep(recorded.retryAtMs, Date.now()));
    }
    return outcome;
  };
}
