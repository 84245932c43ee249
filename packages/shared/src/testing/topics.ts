import { createKafka } from '../kafka/index.ts';
import { createLogger } from '../log/index.ts';

/**
 * The shared test broker keeps every topic a test makes until someone deletes it, and a broker of
 * many thousands of partitions runs out of its heap. So tests delete what they make: the topics
 * named by `createTestTopics` and `stackEnv` go when their file ends (`deleteFileTopics`, from the
 * integration tier's set-up file), and every run first sweeps the topics of earlier runs that a
 * crash, or a test creating topics by other means, left behind (`sweepTestTopics`).
 */

const brokers = () => process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const quiet = createLogger({ level: 'silent' });

/** A name made by `uniqueName`: `<prefix>-<Date.now() in base 36>-<6 hex digits>`, then `.<suffix>` or nothing. */
const STAMPED = /-([0-9a-z]{8,9})-[0-9a-f]{6}(?:\.|$)/;

/** When `uniqueName` made this topic's name, or undefined for a name it did not make. */
export function stampOf(topic: string, now = Date.now()): number | undefined {
  const match = STAMPED.exec(topic);
  if (!match?.[1]) return undefined;
  const stamp = Number.parseInt(match[1], 36);
  // A name that only looks stamped decodes to some instant far from today: not ours.
  const YEAR = 365 * 24 * 3_600_000;
  return stamp > now - YEAR && stamp <= now + 60_000 ? stamp : undefined;
}

const fileTopics = new Set<string>();

/** Topics this test file makes (whoever creates them: the test or the roles it starts): deleted when the file ends. */
export function deleteWhenFileEnds(topics: readonly string[]): void {
  for (const topic of topics) fileTopics.add(topic);
}

/** Deletes the topics of `deleteWhenFileEnds` that exist on the shared test broker; returns how many. */
export async function deleteFileTopics(): Promise<number> {
  const topics = [...fileTopics];
  fileTopics.clear();
  if (topics.length === 0) return 0;
  return deleteExisting((existing) => topics.filter((topic) => existing.has(topic)));
}

/**
 * Deletes the topics `uniqueName` stamped more than `olderThanMs` ago: those of earlier runs, never
 * those of a run going on beside this one (no run lasts that long), nor a developer's own (they
 * carry no stamp). Returns how many it deleted.
 */
export async function sweepTestTopics(olderThanMs: number, now = Date.now()): Promise<number> {
  return deleteExisting((existing) =>
    [...existing].filter((topic) => {
      const stamp = stampOf(topic, now);
      return stamp !== undefined && stamp < now - olderThanMs;
    }),
  );
}

async function deleteExisting(choose: (existing: Set<string>) => string[]): Promise<number> {
  const admin = createKafka({ brokers: brokers(), clientId: 'test-topics', logger: quiet }).admin();
  await admin.connect();
  try {
    const doomed = choose(new Set(await admin.listTopics()));
    // In slices: one request naming thousands of topics would take the broker a long while.
    for (let i = 0; i < doomed.length; i += 200) await admin.deleteTopics(doomed.slice(i, i + 200));
    return doomed.length;
  } finally {
    await admin.disconnect();
  }
}
