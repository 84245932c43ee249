import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors/index.ts';

/**
 * The master keys of the credential store (CREDENTIALS_MASTER_KEY, or CREDENTIALS_MASTER_KEY_FILE
 * naming a file with the same text). Text: comma- or newline-separated entries `<id>:<base64 of
 * 32 bytes>`. The first entry is the current key: it wraps every data key written from now on.
 * The others only unwrap, so a master key rotation has no downtime: put the new key first and
 * keep the old one after it on every process, run `requester credentials rewrap`, then drop the
 * old one. Each wrapped data key names the id of the key that wrapped it.
 */
export interface MasterKey {
  id: string;
  key: Buffer;
}

const ID = /^[A-Za-z0-9._-]{1,64}$/;
const KEY_BYTES = 32;

/** The keys, current first; their bytes sit in a private field and never print. */
export class MasterKeys {
  readonly #keys: ReadonlyMap<string, Buffer>;
  /** Ids, current first (not secret). */
  readonly ids: readonly string[];

  constructor(keys: readonly MasterKey[]) {
    if (keys.length === 0) throw new ConfigError('CREDENTIALS_MASTER_KEY: no key');
    this.#keys = new Map(keys.map((k) => [k.id, k.key]));
    this.ids = Object.freeze(keys.map((k) => k.id));
  }

  /** The id of the key that wraps new data keys. */
  get currentId(): string {
    return this.ids[0] as string;
  }

  /** The key with this id, or undefined when this process does not hold it. */
  key(id: string): Buffer | undefined {
    return this.#keys.get(id);
  }

  toJSON(): { ids: readonly string[] } {
    return { ids: this.ids };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `MasterKeys(${this.ids.join(', ')})`;
  }
}

/** Parses the keys' text; errors name the entry's position and id, never the key. */
export function parseMasterKeys(text: string, variable = 'CREDENTIALS_MASTER_KEY'): MasterKeys {
  const keys: MasterKey[] = [];
  const entries = text
    .split(/[,\n]/)
    .map((e) => e.trim())
    .filter(Boolean);
  entries.forEach((entry, i) => {
    const colon = entry.indexOf(':');
    const id = colon > 0 ? entry.slice(0, colon) : '';
    const where = `${variable}: entry ${i + 1}`;
    if (!ID.test(id)) throw new ConfigError(`${where}: not <id>:<base64 key> (id: letters, digits, . _ -)`);
    const key = Buffer.from(entry.slice(colon + 1), 'base64');
    if (key.length !== KEY_BYTES)
      throw new ConfigError(
        `${where} (${id}): the key must be ${KEY_BYTES} bytes in base64 (openssl rand -base64 32)`,
      );
    if (keys.some((k) => k.id === id)) throw new ConfigError(`${where}: id ${id} is listed twice`);
    keys.push({ id, key });
  });
  return new MasterKeys(keys);
}

/**
 * The master keys of this configuration, or undefined when neither variable is set (then no
 * credential can be created or used: requests naming one fail with `credential_unavailable`).
 */
export function masterKeysFromConfig(config: {
  credentialsMasterKey?: { reveal(): string } | undefined;
  credentialsMasterKeyFile?: string | undefined;
}): MasterKeys | undefined {
  if (config.credentialsMasterKey && config.credentialsMasterKeyFile)
    throw new ConfigError('set CREDENTIALS_MASTER_KEY or CREDENTIALS_MASTER_KEY_FILE, not both');
  if (config.credentialsMasterKey) return parseMasterKeys(config.credentialsMasterKey.reveal());
  const file = config.credentialsMasterKeyFile;
  if (!file) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`CREDENTIALS_MASTER_KEY_FILE: cannot read ${file}: ${(err as Error).message}`);
  }
  return parseMasterKeys(text, 'CREDENTIALS_MASTER_KEY_FILE');
}
