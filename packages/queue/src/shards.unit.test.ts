import { describe, expect, it } from 'vitest';
import { ShardView } from './shards.ts';

/** A view whose every shard is known: `ready` partitions where given, idle (no event) elsewhere. */
function viewOf(shards: number, ready: Record<number, number>): ShardView {
  const view = new ShardView(shards);
  for (let shard = 0; shard < shards; shard++) view.update(shard, ready[shard] ?? 0, -1);
  return view;
}

describe('ShardView.planWave', () => {
  it('with fewer partitions than k, lets each give ceil(k / partitions met) tasks, idle shards skipped', () => {
    const wave = viewOf(8, { 2: 1, 5: 3 }).planWave(8, 8);
    expect(wave.quantum).toBe(2);
    expect(Object.fromEntries(wave.asks)).toEqual({ 2: 2, 5: 6 });
  });

  it('stops at the shard whose partitions can give k tasks, and the next wave starts past it', () => {
    const view = viewOf(8, { 1: 10, 3: 10 });
    const first = view.planWave(4, 8);
    expect(first.quantum).toBe(1);
    expect([...first.asks.values()]).toEqual([4]);
    const second = view.planWave(4, 8);
    expect([...second.asks.values()]).toEqual([4]);
    expect(new Set([...first.asks.keys(), ...second.asks.keys()])).toEqual(new Set([1, 3]));
  });

  it('visits at most maxShards shards, asking more of each', () => {
    const ready = Object.fromEntries(Array.from({ length: 8 }, (_, shard) => [shard, 1]));
    const wave = viewOf(8, ready).planWave(8, 2);
    expect(wave.asks.size).toBe(2);
    expect(wave.quantum).toBe(4);
    expect([...wave.asks.values()]).toEqual([4, 4]);
  });

  it('visits first, once, a shard where a client joined the fair share', () => {
    const view = viewOf(8, { 0: 5, 6: 5 });
    view.first(6);
    expect([...view.planWave(1, 8).asks.keys()]).toEqual([6]);
    expect(view.firstShards()).toEqual([]);
  });

  it('counts a shard never heard of as having work, so that the first lease looks everywhere', () => {
    const wave = new ShardView(4).planWave(4, 8);
    expect(new Set(wave.asks.keys())).toEqual(new Set([0, 1, 2, 3]));
  });
});

describe('ShardView.idleFor', () => {
  it('is 0 with a shard ready, the soonest event otherwise, at most maxIdleMs', () => {
    const idle = viewOf(4, {});
    expect(idle.idleFor(1000)).toBe(1000);
    idle.update(3, 0, 60_000);
    expect(idle.idleFor(1000)).toBe(1000);
    idle.update(1, 2, -1);
    expect(idle.idleFor(1000)).toBe(0);
  });

  it('an announced shard wakes the view: it has work again', () => {
    const view = viewOf(4, {});
    view.wake(2, 0);
    expect(view.idleFor(1000)).toBe(0);
    expect([...view.planWave(1, 8).asks.keys()]).toEqual([2]);
  });
});
