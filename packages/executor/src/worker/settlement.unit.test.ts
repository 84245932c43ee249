import { createRequestContract } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import { outboxRow } from './settlement.ts';

describe('outboxRow', () => {
  const envelope = createRequestContract().parse({
    request: { uri: 'https://example.com/x' },
    meta: { requestId: 'big-1' },
  });
  const progress = { tryCount: 1, waitedMs: 0 };

  it("sends a task read from the router's copy back to the topic it entered by, not the bodies topic", () => {
    const task = {
      ref: { topic: 'requester.in.bodies', partition: 2, offset: '5' },
      requestId: 'big-1',
      tryCount: 0,
      entryTopic: 'requester.in',
    };
    expect(outboxRow(task, envelope, 60_000, progress).topic).toBe('requester.in');
  });

  it('sends any other task back to the topic of its ref', () => {
    const task = {
      ref: { topic: 'requester.in', partition: 2, offset: '5' },
      requestId: 'big-1',
      tryCount: 0,
    };
    expect(outboxRow(task, envelope, 60_000, progress).topic).toBe('requester.in');
  });
});
