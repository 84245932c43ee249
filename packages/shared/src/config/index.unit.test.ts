import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors/index.ts';
import { loadConfig, parseAddressEntry, redactConfigValue, SecretText } from './index.ts';

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

describe('KAFKA_CONTROLLERS', () => {
  it('reads host:port entries; unset leaves the default (each broker port + 1) to the guard', () => {
    expect(loadConfig({}).kafkaControllers).toBeUndefined();
    expect(loadConfig({ KAFKA_CONTROLLERS: 'kafka-1:9093, [fd00::6]:9193' }).kafkaControllers).toEqual([
      'kafka-1:9093',
      '[fd00::6]:9193',
    ]);
    for (const bad of ['kafka-1', 'kafka-1:', ':9093', 'fd00::6:9193', ','])
      expect(() => loadConfig({ KAFKA_CONTROLLERS: bad }), bad).toThrow(/KAFKA_CONTROLLERS=.*host:port/);
  });
});

describe('SHARED_LIMITER_KEYS', () => {
  it('reads the limiter keys the operator declared shared; none by default', () => {
    expect(loadConfig({}).sharedLimiterKeys).toEqual(new Set());
    expect(loadConfig({ SHARED_LIMITER_KEYS: 'partner-a, partner-b,' }).sharedLimiterKeys).toEqual(
      new Set(['partner-a', 'partner-b']),
    );
  });

  it('refuses what no request could name as a limiter key', () => {
    expect(() => loadConfig({ SHARED_LIMITER_KEYS: 'partner a' })).toThrow(
      /SHARED_LIMITER_KEYS=.*"partner a" is not a limiter key/,
    );
  });
});

describe('ALLOW_PRIVATE_TARGETS', () => {
  it('reads IPs and CIDR ranges, each with an optional port (IPv6 in brackets), and *', () => {
    const value = '127.0.0.1:8081, 10.0.0.0/8:443, [::1]:8080, [fc00::/7]:443, 192.168.0.0/16, ::1, *';
    expect(loadConfig({ ALLOW_PRIVATE_TARGETS: value }).allowPrivateTargets).toEqual(value.split(', '));
    expect(parseAddressEntry('10.0.0.0/8:443')).toEqual({
      address: '10.0.0.0',
      family: 'ipv4',
      bits: 8,
      port: 443,
    });
    expect(parseAddressEntry('[::1]:8080')).toEqual({
      address: '::1',
      family: 'ipv6',
      bits: undefined,
      port: 8080,
    });
    expect(parseAddressEntry('::1')).toEqual({
      address: '::1',
      family: 'ipv6',
      bits: undefined,
      port: undefined,
    });
  });

  it.each([
    '127.0.0.1:0',
    '127.0.0.1:70000',
    '[127.0.0.1]:80',
    '[::1]:http',
    'localhost:80',
    '10.0.0.0/33',
    '1.2.3.4:',
  ])('refuses %s by name', (item) => {
    expect(() => loadConfig({ ALLOW_PRIVATE_TARGETS: item })).toThrow(/ALLOW_PRIVATE_TARGETS=.*is not an IP/);
  });
});

describe('redactConfigValue', () => {
  it('hides the password of every URL, with or without a user, and every SecretText', () => {
    const shown = (value: unknown) => redactConfigValue(value);
    expect(shown('postgres://app:pa55@db:5432/requester')).toBe(
      'postgres://app:[redacted]@db:5432/requester',
    );
    expect(shown('redis://:s3cret@127.0.0.1:6379')).toBe('redis://:[redacted]@127.0.0.1:6379');
    expect(shown('rediss://default:a/b@c@r1:6379,redis://:x@r2:6379')).toBe(
      'rediss://default:[redacted]@r1:6379,redis://:[redacted]@r2:6379',
    );
    expect(shown(new SecretText('whsec_abc'))).toBe('[redacted]');
    for (const plain of ['redis://127.0.0.1:6379', 'postgres://app@db/x', 'info', 42, undefined]) {
      expect(shown(plain)).toBe(plain);
    }
  });

  it('keeps a URL password out of a configuration error', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'otlp://u:hunter2@ x' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT="otlp:\/\/u:\[redacted\]@ x"/,
    );
  });
});
