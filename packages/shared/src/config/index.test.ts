import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors/index.ts';
import { loadConfig } from './index.ts';

describe('loadConfig', () => {
  it('reads durations in Go syntax as milliseconds, defaults included', () => {
    expect(loadConfig({}).kafkaSessionTimeout).toBe(10_000);
    expect(loadConfig({ KAFKA_SESSION_TIMEOUT: '1m30s' }).kafkaSessionTimeout).toBe(90_000);
  });

  it('names every bad variable, its value and what is wrong', () => {
    const load = () => loadConfig({ KAFKA_SESSION_TIMEOUT: '2s', MAX_WORKERS: 'many' });
    expect(load).toThrow(ConfigError);
    expect(load).toThrow(/KAFKA_SESSION_TIMEOUT="2s": must be at least 6s/);
    expect(load).toThrow(/MAX_WORKERS="many"/);
  });

  it('lets overrides (CLI flags) win over the environment', () => {
    expect(loadConfig({ MAX_WORKERS: '4' }, { maxWorkers: '9' }).maxWorkers).toBe(9);
  });
});
