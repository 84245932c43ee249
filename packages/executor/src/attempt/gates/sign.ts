import { toHttpCall } from '../../http/request.ts';
import { SigningKeyring, signRequest } from '../../signing/index.ts';
import type { Attempt } from '../attempt.ts';
import type { GateSpec } from '../gate.ts';

/**
 * The outgoing call, signed when the request asks (per attempt: a fresh `webhook-timestamp`).
 * Before the other gates: an unknown key id fails before it spends a token or a breaker slot, and
 * the few ms to the call leave the timestamp well inside any receiver's tolerance.
 */
export const sign: GateSpec = {
  name: 'sign',
  does: 'builds the call, signed when the request asks',
  exits: [{ when: 'unknown or revoked key', becomes: 'error result, dead letter `permanent`' }],
  link(modules) {
    const keyring = modules.signing ?? new SigningKeyring({ legacy: modules.signingKeys });
    const signed = async (attempt: Attempt, keyId: string) => {
      const call = toHttpCall(attempt.envelope);
      const keys = await keyring.keys(keyId, call);
      const { requestId, client } = attempt.envelope.meta;
      attempt.call = signRequest(call, { keyId, requestId, client }, keys);
      return attempt.next();
    };
    // Unsigned, the call is built here and now: no promise of its own per call.
    return (attempt) => {
      const signing = attempt.envelope.meta.signing;
      if (signing) return signed(attempt, signing.keyId);
      attempt.call = toHttpCall(attempt.envelope);
      return attempt.next();
    };
  },
};
