import { originOf } from '@requester/policies';
import {
  attemptsInBudget,
  errorResult,
  isWakeUp,
  type RequestEnvelope,
  wakeUpResult,
} from '@requester/shared/contract';
import type { DestinationGates } from '@requester/shared/destinations';
import { RequesterError } from '@requester/shared/errors';
import type { LineLogger } from '@requester/shared/log';
import { msToNs } from '@requester/shared/time';
import type { Granted } from '../bulkhead/index.ts';
import { outcomeLabel } from '../metrics.ts';
import { callResult } from '../result/index.ts';
import { SigningKeyring } from '../signing/index.ts';
import { outcomeStep, type SlotKey, waitCap } from '../worker/decide.ts';
import { Attempt } from './attempt.ts';
import { CHAIN } from './chain.ts';
import { type Chain, compose } from './compose.ts';
import { journalCache } from './journal.ts';
import type { PolicyModules } from './modules.ts';
import { type CallOrRefusal, isRefusal, type Outcome, type Progress } from './outcome.ts';
import { deadLetterOf, refusedOutcome } from './refused.ts';

export { LATEST_START_MS } from './gates/limit.ts';
export { paceIdentity } from './identity.ts';
export type { PolicyModules } from './modules.ts';
export type { CallOrRefusal, Outcome, Progress, Refusal } from './outcome.ts';

/** Errors of the request itself, thrown before the call: an error result, never retried. */
const PERMANENT: ReadonlySet<string> = new Set([
  'invalid_request',
  'invalid_config',
  'credential_revoked',
  'credential_origin_refused',
]);

/** A Redis hiccup of a gate: come back soon; neither an attempt nor a wait. */
const GATE_UNAVAILABLE_RETRY_MS = 1_000;

/**
 * The delivery policies around one attempt (docs/architecture.md §5): the chain of gates of
 * chain.ts, composed once, and the retry decision of its answer. The rules live in
 * worker/decide.ts; the gates gather their facts (Redis, the target). Queue, outbox and Kafka
 * writes are the worker's.
 */
export class Policies {
  private readonly modules: PolicyModules;
  private readonly signing: SigningKeyring;
  private readonly random: () => number;
  private readonly chain: Chain<Attempt, CallOrRefusal>;

  constructor(modules: PolicyModules) {
    this.signing = modules.signing ?? new SigningKeyring({ legacy: modules.signingKeys });
    this.modules = { ...modules, signing: this.signing };
    this.random = modules.random ?? Math.random;
    this.chain = compose(CHAIN.map((gate) => gate.link(this.modules)));
  }

  /**
   * One attempt of `envelope`, `progress` being where the task stood when leased; `handed`: a slot
   * of its origin's bulkhead handed to it while it waited parked (see waitForSlot), used instead
   * of asking the bulkhead (released here when the call ends; its caller releases it whatever
   * happens, a second release doing nothing); `destination`: what the destination it names pins
   * for the gates. What the request itself gets wrong (an unknown
   * signing key, a bad limiter window) ends in an error result; a policy store that is down, in a
   * reschedule; only bugs throw.
   */
  async attempt(
    envelope: RequestEnvelope,
    progress: Progress,
    log: LineLogger,
    handed?: Granted,
    destination?: DestinationGates,
  ): Promise<Outcome> {
    const tryCount = progress.tryCount + 1;
    const answer = { tryCount, waitTimeNs: msToNs(progress.waitedMs) };
    try {
      if (isWakeUp(envelope)) return await this.wakeUp(envelope, answer);
      const attempt = new Attempt(this.chain, envelope, tryCount, progress.pacedAt, log, handed, destination);
      const tried = await attempt.next();
      if (attempt.cache) journalCache(this.modules.journal, envelope, attempt.cache);
      if (attempt.cache === 'hit' && !isRefusal(tried)) {
        const result = callResult(envelope, tried, { ...answer, cached: true });
        return { kind: 'result', result, label: 'cached' };
      }
      if (isRefusal(tried)) return refusedOutcome(envelope, progress, tried.stop, this.modules);
      const step = outcomeStep({
        outcome: tried,
        retry: envelope.meta.retry,
        attempts: attemptsInBudget(envelope, tryCount),
        nowMs: Date.now(),
        random: this.random(),
        retryAfterMaxMs: this.modules.retryAfterMaxMs,
        maxWaitMs: waitCap(envelope, this.modules.horizonMs),
      });
      if (step.kind === 'retry') {
        log.info({ tryCount, delayMs: step.delayMs, reason: step.reason }, 'attempt failed; retrying later');
        return {
          kind: 'reschedule',
          delayMs: step.delayMs,
          reason: 'retry',
          progress: { ...progress, tryCount, pacedAt: undefined },
        };
      }
      const coalesced = attempt.cache === 'coalesced';
      const result = callResult(envelope, tried, { ...answer, coalesced });
      return { kind: 'result', result, label: outcomeLabel(tried), deadLetter: deadLetterOf(step) };
    } catch (err) {
      if (!(err instanceof RequesterError)) throw err;
      if (err.code === 'dependency_unavailable') {
        log.warn({ err }, 'a policy store is unavailable; the task will be tried again');
        return {
          kind: 'reschedule',
          delayMs: GATE_UNAVAILABLE_RETRY_MS,
          reason: 'policy_unavailable',
          progress: { ...progress, pacedAt: undefined },
        };
      }
      if (!PERMANENT.has(err.code)) throw err;
      // e.g. an unknown or revoked signing key id, a limiter window under 1 ms: no retry can fix the request.
      log.warn({ err }, 'request refused by a delivery policy');
      const result = errorResult(envelope.meta.requestId, err.code, err.message, {
        ...answer,
        tryCount: progress.tryCount,
        proxyData: envelope.meta.proxyData,
      });
      return { kind: 'result', result, label: err.code, deadLetter: 'permanent' };
    }
  }

  /**
   * A slot of the origin of `uri`, waited for without a worker by a task the bulkhead refused (see
   * Bulkhead.waitForSlot), or of `wait.key` when that concurrency key refused it (the refusal
   * named it); undefined once `signal` aborts, or without a bulkhead. `wait.paced` false: its
   * destination switched pacing off, so the origin's learnt limit does not bound the wait.
   */
  waitForSlot(
    uri: string,
    client: string | undefined,
    signal: AbortSignal,
    partition?: string,
    wait: { paced?: boolean; key?: SlotKey } = {},
  ): Promise<Granted | undefined> {
    const { bulkhead, pacer, adaptiveConcurrency = true, concurrency } = this.modules;
    const { paced = true, key } = wait;
    if (key && concurrency) return concurrency.waitFor(key.key, key.limit, client, signal, partition);
    if (!bulkhead) return Promise.resolve(undefined);
    const origin = originOf(uri);
    // A destination with pacing off waits for a slot under the fixed cap, as its gate asks (bulkhead.ts).
    const limit = adaptiveConcurrency && pacer && paced ? () => pacer.limitOf(origin) : undefined;
    return bulkhead.waitForSlot(origin, limit, client, signal, partition);
  }

  /** A wake-up calls nobody, but the signing key it names must exist, as for a call. */
  private async wakeUp(
    envelope: RequestEnvelope,
    answer: { tryCount: number; waitTimeNs: number },
  ): Promise<Outcome> {
    const signing = envelope.meta.signing;
    if (signing) await this.signing.keys(signing.keyId);
    return { kind: 'result', result: wakeUpResult(envelope, answer), label: 'wake_up' };
  }
}
