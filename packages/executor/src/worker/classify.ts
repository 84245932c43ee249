import type { RequestEnvelope } from '@requester/shared';
import type { CallOutcome } from '../http/index.ts';

/**
 * The decision point after a call (DESIGN.md §5 "Executor decisions"): deliver the result, or try
 * again later. Retries, limiter denials and the circuit breaker plug in here as classifiers; the
 * worker already knows how to carry out each decision.
 */
export type Decision = { action: 'deliver' } | { action: 'retry'; delayMs: number; reason: string };

export interface AttemptFacts {
  envelope: RequestEnvelope;
  outcome: CallOutcome;
  /** Attempts made, this one included. */
  tryCount: number;
  /** The task's queue partition is ordered (`!`): a retry keeps it at the head. */
  ordered: boolean;
}

export type Classifier = (facts: AttemptFacts) => Decision;

/** This stage's policy: every outcome is final and delivered, failures included. */
export const deliverEveryOutcome: Classifier = () => ({ action: 'deliver' });
