import { describe, expect, it } from 'vitest';
import { RequesterError } from '../errors/index.ts';
import { decodeQueuedTask, encodeQueuedTask, inlineRecord, queuePartition, taskId } from './index.ts';

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

  it('carries the resolved start-by deadline as `d`, and nothing without one', () => {
    const task = { ref: { topic: 'in', partition: 0, offset: '1' }, requestId: 'r-1', tryCount: 0 };
    const payload = encodeQueuedTask({ ...task, deadlineAt: 1_764_000_030_000 });
    expect(JSON.parse(payload)).toMatchObject({ d: 1_764_000_030_000 });
    expect(decodeQueuedTask(payload)).toEqual({ ...task, deadlineAt: 1_764_000_030_000 });
    expect(encodeQueuedTask(task)).not.toMatch(/"d"/);
  });

  it("carries the entry topic of a task whose ref is the router's copy on the bodies topic", () => {
    const task = {
      ref: { topic: 'requester.in.bodies', partition: 3, offset: '12' },
      requestId: 'big-1',
      tryCount: 0,
      entryTopic: 'requester.in',
    };
    expect(JSON.parse(encodeQueuedTask(task)).e).toBe('requester.in');
    expect(decodeQueuedTask(encodeQueuedTask(task))).toEqual(task);
    expect(decodeQueuedTask(encodeQueuedTask({ ...task, entryTopic: undefined })).entryTopic).toBeUndefined();
  });

  it('carries the trace context compactly: the traceparent without its version, and the requeue time', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const task = {
      ref: { topic: 'requester.in', partition: 0, offset: '1' },
      requestId: 'r-1',
      tryCount: 1,
      traceparent,
      requeuedAt: 1_764_000_000_000,
    };
    const payload = encodeQueuedTask(task);
    expect(JSON.parse(payload)).toMatchObject({ x: traceparent.slice(3), q: 1_764_000_000_000 });
    expect(decodeQueuedTask(payload)).toEqual(task);
    // A task queued while tracing is off carries none of it.
    expect(encodeQueuedTask({ ...task, traceparent: undefined, requeuedAt: undefined })).not.toMatch(
      /"[xq]"/,
    );
  });

  it('carries a small in-record inline, as JSON, with only the headers the executor reads', () => {
    const text = '{"request":{"uri":"http://t.example/","body":"say \\"hi\\""},"meta":{"requestId":"r-1"}}';
    const input = JSON.parse(text);
    const headers = {
      traceparent: Buffer.from('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'),
      'requester-reply-to': ['gw-1'],
      'x-other': 'dropped',
    };
    const inline = inlineRecord(input, text.length, headers, text.length);
    expect(inline).toEqual({
      value: input,
      headers: {
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        'requester-reply-to': 'gw-1',
      },
    });
    const task = { ref: { topic: 'in', partition: 0, offset: '5' }, requestId: 'r-1', tryCount: 0, inline };
    const payload = encodeQueuedTask(task);
    expect(decodeQueuedTask(payload)).toEqual(task);
    // The value is embedded as JSON, not as an escaped string: the task grows by its bytes alone.
    expect(payload).toContain(`"v":${text}`);
    // Over the bound, empty, or with the bound at 0: the task holds the ref alone.
    expect(inlineRecord(input, text.length, headers, text.length - 1)).toBeUndefined();
    expect(inlineRecord(input, 0, headers, 100)).toBeUndefined();
    expect(inlineRecord(input, text.length, undefined, 0)).toBeUndefined();
    expect(inlineRecord(input, text.length, undefined, 1000)).toEqual({ value: input });
  });

  it('carries the mark of an inline value the router checked (k: 1), and no mark otherwise', () => {
    const ref = { topic: 'in', partition: 0, offset: '5' };
    const value = { request: { uri: '', method: 'GET' }, meta: { requestId: 'r-1' } };
    const checked = { ref, requestId: 'r-1', tryCount: 0, inline: { value, checked: true as const } };
    expect(encodeQueuedTask(checked)).toContain('"k":1');
    expect(decodeQueuedTask(encodeQueuedTask(checked))).toEqual(checked);
    const unchecked = { ref, requestId: 'r-1', tryCount: 0, inline: { value } };
    expect(encodeQueuedTask(unchecked)).not.toContain('"k"');
    expect(decodeQueuedTask(encodeQueuedTask(unchecked)).inline).toEqual({ value });
    // Only the exact mark counts.
    const other = encodeQueuedTask(unchecked).replace('"v":', '"k":true,"v":');
    expect(decodeQueuedTask(other).inline?.checked).toBeUndefined();
  });

  it('ignores inline headers that are not strings (the value still counts)', () => {
    const payload = JSON.stringify({ t: 'in', p: 0, o: '1', r: 'r', n: 0, v: {}, h: { a: 1 } });
    expect(decodeQueuedTask(payload).inline).toEqual({ value: {} });
  });

  it('refuses a payload that is not a task, naming it', () => {
    expect(() => decodeQueuedTask('{"x":1}')).toThrow(/not a queued task: \{"x":1\}/);
    expect(() => decodeQueuedTask('{"x":1}')).toThrow(RequesterError);
  });

  it('derives ids and partitions as before for requests without a client', () => {
    expect(taskId(undefined, 'a', 0)).toBe('a:0');
    expect(taskId(undefined, 'a', 2, 0)).toBe('a:2');
    expect(taskId(undefined, 'a', 2, 1500)).toBe('a:2:w1500');
    expect(queuePartition(undefined, '!order-1', 'r1')).toBe('!order-1');
    expect(queuePartition(undefined, undefined, 'r1')).toBe('#r1');
    expect(queuePartition(undefined, '', 'r1')).toBe('#r1');
  });

  it("puts a client's ids and partitions in its namespace; an ordered partition stays ordered", () => {
    expect(taskId('probe-a', 'a', 2, 1500)).toBe('a:2:w1500 @probe-a');
    expect(taskId('probe-a', 'a', 0)).not.toBe(taskId('probe-b', 'a', 0));
    expect(queuePartition('probe-a', '!order-42', 'r1')).toBe('!order-42 @probe-a');
    expect(queuePartition('probe-a', undefined, 'r1')).toBe('#r1 @probe-a');
  });
});
