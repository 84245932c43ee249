import { afterAll } from 'vitest';
import { deleteFileTopics } from '../packages/shared/src/testing/index.ts';

// Registered before the file's own hooks, so it runs after them (vitest runs after-hooks in reverse):
// the file's stacks and consumers have stopped when their topics go (see packages/shared/src/testing/topics.ts).
afterAll(async () => {
  await deleteFileTopics().catch((err: unknown) => {
    process.stderr.write(`could not delete this file's test topics: ${String(err)}\n`);
  });
}, 60_000);
