import { describe, expect, it } from 'vitest';
import { RequesterError } from '../errors/index.ts';
import { decodeQueuedTask, encodeQueuedTask, queuePartition, taskId } from './index.ts';

describe('queued task encoding', () => {
  it('round-trips a task with a 64-bit offset', () => {
    const task = {
      ref: { topic: 'requester.in', partition: 7, offset: '9007199254740993' },
      requestId: 'ord-42',
      tryCount: 2,
      createdAt: 1_764_000_000_000,
      waitedMs: 1500,
    };
    expect(decodeQueuedTask(encodeQueuedTask(task))).toEqual(task);
  });

  it('refuses a payload that is not a task, naming it', () => {
    expect(() => decodeQueuedTask('{"x":1}')).toThrow(/not a queued task: \{"x":1\}/);
    expect(() => decodeQueuedTask('{"x":1}')).toThrow(RequesterError);
  });

  it('derives ids and partitions', () => {
    expect(taskId('a', 0)).toBe('a:0');
    expect(taskId('a', 2, 0)).toBe('a:2');
    expect(taskId('a', 2, 1500)).toBe('a:2:w1500');
    expect(queuePartition('!order-1', 'r1')).toBe('!order-1');
    expect(queuePartition(undefined, 'r1')).toBe('#r1');
    expect(queuePartition('', 'r1')).toBe('#r1');
  });
});
