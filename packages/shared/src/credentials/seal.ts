import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { RequesterError } from '../errors/index.ts';
import type { MasterKeys } from './master.ts';

/**
 * Envelope encryption (AES-256-GCM): each credential's secrets are encrypted with a data key of
 * its own, and only that data key is encrypted ("wrapped") with the master key. Rotating the
 * master key re-wraps 32 bytes per credential and never touches the secrets; a stolen table is
 * useless without the master key. The associated data binds each ciphertext to its row, so a
 * row's sealed bytes copied into another row do not open there.
 */
export interface Sealed {
  /** iv (12) ‖ ciphertext ‖ tag (16) of the secrets, under the data key. */
  data: Buffer;
  /** iv (12) ‖ ciphertext ‖ tag (16) of the data key, under the master key `masterKeyId`. */
  wrappedKey: Buffer;
  masterKeyId: string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

export function encrypt(key: Buffer, plain: Buffer, aad: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  return Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
}

export function decrypt(key: Buffer, sealed: Buffer, aad: string): Buffer {
  const iv = sealed.subarray(0, IV_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  return Buffer.concat([
    decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)),
    decipher.final(),
  ]);
}

/** Seals `plain` for the row `aad` under a fresh data key wrapped by the current master key. */
export function seal(masters: MasterKeys, plain: Buffer, aad: string): Sealed {
  const dataKey = randomBytes(32);
  try {
    return {
      data: encrypt(dataKey, plain, aad),
      wrappedKey: wrap(masters, dataKey, aad),
      masterKeyId: masters.currentId,
    };
  } finally {
    dataKey.fill(0);
  }
}

/** The data key of a sealed row (the caller zeroes it when done). */
export function unwrap(
  masters: MasterKeys,
  sealed: Pick<Sealed, 'wrappedKey' | 'masterKeyId'>,
  aad: string,
): Buffer {
  const master = masters.key(sealed.masterKeyId);
  if (!master)
    throw new RequesterError(
      'invalid_config',
      `credential ${aad} is wrapped by master key ${sealed.masterKeyId}, which CREDENTIALS_MASTER_KEY does not hold`,
    );
  try {
    return decrypt(master, sealed.wrappedKey, `key:${aad}`);
  } catch {
    throw new RequesterError(
      'invalid_config',
      `credential ${aad}: master key ${sealed.masterKeyId} does not open its data key`,
    );
  }
}

export function wrap(masters: MasterKeys, dataKey: Buffer, aad: string): Buffer {
  return encrypt(masters.key(masters.currentId) as Buffer, dataKey, `key:${aad}`);
}

/** Opens a sealed row. */
export function open(masters: MasterKeys, sealed: Sealed, aad: string): Buffer {
  const dataKey = unwrap(masters, sealed, aad);
  try {
    return decrypt(dataKey, sealed.data, aad);
  } finally {
    dataKey.fill(0);
  }
}
