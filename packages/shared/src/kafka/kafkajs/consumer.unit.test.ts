import { describe, expect, it } from 'vitest';
import { BackgroundCommits } from './consumer.ts';

type Offsets = Array<{ topic: string; partition: number; offset: string }>;

/** A commit function whose calls stay open until the test ends them. */
function heldCommits() {
  const calls: Array<{ offsets: Offsets; end: (err?: Error) => void }> = [];
  const commit = (offsets: Offsets) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ offsets, end: (err) => (err ? reject(err) : resolve()) });
    });
  return { calls, commit };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('BackgroundCommits', () => {
  it('commits at once, one request at a time, the latest offset of each partition in the next', async () => {
    const { calls, commit } = heldCommits();
    const commits = new BackgroundCommits(commit);
    commits.add('t', 0, '5');
    await settle();
    expect(calls.map((c) => c.offsets)).toEqual([[{ topic: 't', partition: 0, offset: '5' }]]);
    // While that commit is in flight, later batches only move the offsets to commit next.
    commits.add('t', 0, '9');
    commits.add('t', 1, '3');
    commits.add('t', 0, '12');
    await settle();
    expect(calls).toHaveLength(1);
    calls[0]?.end();
    await settle();
    expect(calls[1]?.offsets).toEqual([
      { topic: 't', partition: 0, offset: '12' },
      { topic: 't', partition: 1, offset: '3' },
    ]);
    const flushed = commits.flush();
    calls[1]?.end();
    await flushed;
    expect(calls).toHaveLength(2);
  });

  it('a failed commit does not stop the next ones (its records are delivered again at worst)', async () => {
    const { calls, commit } = heldCommits();
    const commits = new BackgroundCommits(commit);
    commits.add('t', 0, '1');
    await settle();
    commits.add('t', 0, '2');
    calls[0]?.end(new Error('REBALANCE_IN_PROGRESS'));
    await settle();
    expect(calls[1]?.offsets).toEqual([{ topic: 't', partition: 0, offset: '2' }]);
    calls[1]?.end();
    await commits.flush();
  });

  it('flush resolves at once when nothing is pending', async () => {
    const commits = new BackgroundCommits(() => Promise.resolve());
    await commits.flush();
    commits.add('t', 0, '1');
    await commits.flush();
  });
});
