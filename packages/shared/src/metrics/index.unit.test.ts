import { describe, expect, it } from 'vitest';
import { eventually, silentLogger } from '../testing/index.ts';
import {
  BoundedLabel,
  collectProcessMetrics,
  DEFAULT_BUCKETS,
  OTHER_LABEL,
  registry,
  startSampler,
} from './index.ts';

describe('BoundedLabel', () => {
  it('gives the first max values a label of their own and every later one "other", for good', () => {
    const label = new BoundedLabel(2);
    expect(['a', 'b', 'c', 'a', 'd', 'b'].map((v) => label.of(v))).toEqual([
      'a',
      'b',
      OTHER_LABEL,
      'a',
      OTHER_LABEL,
      'b',
    ]);
  });
});

describe('process metrics', () => {
  it('drop the default gauges named _total and keep their per-type gauges', async () => {
    collectProcessMetrics();
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names.filter((n) => n.startsWith('requester_nodejs_active_') && n.endsWith('_total'))).toEqual([]);
    expect(names).toContain('requester_nodejs_active_handles');
  });

  it('histogram buckets reach 60 s', () => {
    expect(DEFAULT_BUCKETS.at(-1)).toBe(60);
  });
});

describe('startSampler', () => {
  it('samples at once and then on its interval, goes on after a failure, and stops', async () => {
    let calls = 0;
    const sampler = startSampler(
      'test',
      10,
      async () => {
        calls++;
        if (calls === 2) throw new Error('down for a moment');
      },
      silentLogger,
    );
    // Past the failing second call: it kept sampling (however late a loaded machine runs timers).
    await eventually(() => calls >= 3, 10_000, 'a third sample');
    await sampler.stop();
    const stoppedAt = calls;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toBe(stoppedAt);
  });
});

describe('startSampler stop', () => {
  it('does not wait for a sample that hangs', async () => {
    const sampler = startSampler('hanging', 10, () => new Promise<void>(() => {}), silentLogger);
    const stopped = await Promise.race([
      sampler.stop().then(() => 'stopped'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 10_000)),
    ]);
    expect(stopped).toBe('stopped');
  });
});
