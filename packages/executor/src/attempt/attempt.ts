import { type Admission, originOf, type PaceSlot, type Reservation } from '@requester/policies';
import type { RequestEnvelope } from '@requester/shared/contract';
import type { DestinationGates } from '@requester/shared/destinations';
import type { LineLogger } from '@requester/shared/log';
import type { Granted, SlotGrant } from '../bulkhead/index.ts';
import { isKeyGrant, type KeyGrant } from '../concurrency/index.ts';
import type { HttpCall } from '../http/index.ts';
import { type Chain, Passage } from './compose.ts';
import { paceIdentity } from './identity.ts';
import type { CallOrRefusal } from './outcome.ts';

/**
 * One attempt on its way through the chain of gates: the request, and what each gate leaves for
 * the ones after it (the signed call, the bulkhead's slot, the limiter's reservation, the breaker's
 * admission). Fields, not closures, so a walk through the chain allocates one object.
 */
export class Attempt extends Passage<Attempt, CallOrRefusal> {
  readonly envelope: RequestEnvelope;
  readonly tryCount: number;
  /** The pacing slot the task carries from its last wait (see Progress.pacedAt). */
  readonly pacedAt: number | undefined;
  readonly log: LineLogger;
  /** A bulkhead slot handed to the task while it waited parked, used instead of asking. */
  readonly handed: Granted | undefined;
  /** A slot of its concurrency key handed to it while it waited parked, used instead of asking. */
  readonly handedKey: KeyGrant | undefined;
  /** What the destination it names pins for the gates (its own breaker, pacing on or off, its rate limit). */
  readonly destination: DestinationGates | undefined;

  /** The cache's part: the answer was its stored one, or another request's call of this process. */
  cache: 'hit' | 'coalesced' | undefined;
  /** The outgoing call (sign). */
  call: HttpCall | undefined;
  /** The bulkhead's grant, released once the answer is in (see answered). */
  grant: SlotGrant | undefined;
  /** The concurrency key's slot, released once the answer is in (see answered). */
  keyGrant: KeyGrant | undefined;
  /** Whether the limit held calls back, told to the pacer with the answer. */
  slot: PaceSlot | undefined;
  /** The limiters' two-phase slots, settled once the request is on the socket (or given back). */
  reservations: readonly Reservation[] | undefined;
  /** Their settlement, once started. */
  settled: Promise<void> | undefined;
  /** The breaker's admission, recorded with the answer. */
  admission: Admission | undefined;

  private originOfCall: string | undefined;
  private identityOfCall: string | null | undefined;
  private released = false;

  constructor(
    chain: Chain<Attempt, CallOrRefusal>,
    envelope: RequestEnvelope,
    tryCount: number,
    pacedAt: number | undefined,
    log: LineLogger,
    handed: Granted | undefined,
    destination?: DestinationGates,
  ) {
    super(chain);
    this.destination = destination;
    this.envelope = envelope;
    this.tryCount = tryCount;
    this.pacedAt = pacedAt;
    this.log = log;
    // The slot a parked task was handed is its origin's or its concurrency key's (Policies.waitForSlot).
    this.handed = isKeyGrant(handed) ? undefined : handed;
    this.handedKey = isKeyGrant(handed) ? handed : undefined;
  }

  /** The origin called: the unit of pacing, the bulkhead and the breaker. */
  get origin(): string {
    this.originOfCall ??= originOf(this.envelope.request.uri);
    return this.originOfCall;
  }

  /** The breaker judging the call: its destination's own, when it has one, else the origin's. */
  get breakerKey(): string {
    return this.destination?.breaker?.key ?? this.origin;
  }

  /** Whether the origin's pacing applies (a destination may switch it off for its calls). */
  get paced(): boolean {
    return this.destination?.pacing !== false;
  }

  /** The credential identity its pace is kept for (paceIdentity), computed once. */
  get identity(): string | undefined {
    if (this.identityOfCall === undefined) this.identityOfCall = paceIdentity(this.envelope) ?? null;
    return this.identityOfCall ?? undefined;
  }

  /**
   * The answer is in: the bulkhead's and the concurrency key's slots go back now, not after the
   * report and record round trips (held through them, a slot leaves the target idle that long per
   * call). Idempotent (so is a grant's release).
   */
  answered(): void {
    this.keyGrant?.release();
    const grant = this.grant;
    if (this.released || !grant?.granted) return;
    this.released = true;
    grant.release();
  }
}
