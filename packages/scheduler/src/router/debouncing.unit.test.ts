import { createRequestContract } from '@requester/shared/contract';
import type { Debounces } from '@requester/shared/debounce';
import { silentLogger } from '@requester/shared/testing';
import { describe, expect, it } from 'vitest';
import { debounceBatch } from './debouncing.ts';
import { type Route, routeRecord, type SourceRecord } from './route.ts';

const contract = createRequestContract();
const NOW = Date.parse('2026-12-01T09:00:00Z');
const HORIZON = 1_000;

function routed(requestId: string, offset: string, meta: Record<string, unknown> = {}) {
  const value = { request: { uri: 'https://api.example.com/x' }, meta: { requestId, ...meta } };
  const record: SourceRecord = {
    topic: 'in',
    partition: 0,
    offset,
    key: null,
    value: Buffer.from(JSON.stringify(value)),
    timestamp: String(NOW - 10),
  };
  return { record, route: routeRecord(record, contract, { now: NOW, horizonMs: HORIZON }) as Route };
}

/** Debounces that answer from a plan, recording what was entered in the order sent. */
function planned(dueAt: (requestId: string) => number | Error) {
  const entered: Array<{ requestId: string; arrivedAt: number; offset: string }> = [];
  const debounces = {
    enter: async (
      _client: string | undefined,
      requestId: string,
      _spec: unknown,
      _now: number,
      seat: { arrivedAt: number; offset: string },
    ) => {
      entered.push({ requestId, arrivedAt: seat.arrivedAt, offset: seat.offset });
      const due = dueAt(requestId);
      if (due instanceof Error) throw due;
      return { dueAt: due, replaced: '' };
    },
  } as unknown as Debounces;
  return { debounces, entered };
}

describe('debounceBatch', () => {
  const debounce = { key: 'profile', delay: '2s' };

  it('enters each debounced record in offset order at its arrival, and dates or parks it by its due time', async () => {
    const routes = [routed('a', '1', { debounce }), routed('plain', '2'), routed('b', '3', { debounce })];
    const { debounces, entered } = planned((id) => (id === 'a' ? NOW + 500 : NOW + 2_000));
    const held = await debounceBatch(routes, debounces, NOW, HORIZON, () => false, silentLogger);
    expect(entered).toEqual([
      { requestId: 'a', arrivedAt: NOW - 10, offset: '1' },
      { requestId: 'b', arrivedAt: NOW - 10, offset: '3' },
    ]);
    expect(routes[0]?.route).toMatchObject({ kind: 'queue', task: { dueAt: NOW + 500 } });
    expect(routes[1]?.route).toMatchObject({ kind: 'queue', task: { dueAt: NOW } });
    expect(routes[2]?.route).toMatchObject({ kind: 'outbox', row: { dueAt: new Date(NOW + 2_000) } });
    expect([...held.values()]).toEqual([NOW + 500, NOW + 2_000]);
  });

  it('leaves a relayed copy alone: it entered its burst already', async () => {
    const routes = [routed('a', '1', { debounce })];
    const { debounces, entered } = planned(() => NOW + 500);
    const held = await debounceBatch(routes, debounces, NOW, HORIZON, () => true, silentLogger);
    expect(entered).toEqual([]);
    expect(held.size).toBe(0);
  });

  it('routes a record as without debounce when its key cannot be read (fail open)', async () => {
    const routes = [routed('a', '1', { debounce }), routed('b', '2', { debounce })];
    const { debounces } = planned((id) => (id === 'a' ? new Error('Redis away') : NOW + 300));
    const held = await debounceBatch(routes, debounces, NOW, HORIZON, () => false, silentLogger);
    expect(routes[0]?.route).toMatchObject({ kind: 'queue', task: { dueAt: NOW } });
    expect(routes[1]?.route).toMatchObject({ kind: 'queue', task: { dueAt: NOW + 300 } });
    expect([...held.keys()]).toEqual([routes[1]?.record]);
  });
});
