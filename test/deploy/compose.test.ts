import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROLE_NAMES } from '../../packages/shared/src/role/index.ts';

/**
 * docker-compose.yml, checked offline (no Docker engine here): dclint validates it against the
 * Compose specification's JSON Schema (and its error-level rules), then the rules this project
 * keeps are checked on the parsed file.
 */
const ROOT = join(import.meta.dirname, '../..');
const COMPOSE = join(ROOT, 'docker-compose.yml');
const DCLINT = join(ROOT, 'node_modules/.bin/dclint');

// biome-ignore lint/suspicious/noExplicitAny: compose services are arbitrary YAML
type Service = Record<string, any>;
const INFRA = ['kafka', 'redis', 'postgres'];

function lint(file: string): { ok: boolean; output: string } {
  try {
    return { ok: true, output: execFileSync(DCLINT, ['-q', '--color', 'false', file], { encoding: 'utf8' }) };
  } catch (err) {
    return { ok: false, output: String((err as { stdout?: string }).stdout ?? err) };
  }
}

function services(text: string): Record<string, Service> {
  return (parse(text, { merge: true }) as { services: Record<string, Service> }).services;
}

describe('docker-compose.yml', () => {
  const text = readFileSync(COMPOSE, 'utf8');
  const all = services(text);
  const roles = Object.entries(all).filter(([, s]) => s.command?.[0] === '--role');

  it('is valid against the Compose specification', () => {
    expect(lint(COMPOSE)).toMatchObject({ ok: true });
  });

  it('runs every role as its own service, each waiting for healthy dependencies', () => {
    expect(new Set(roles.flatMap(([, s]) => String(s.command[1]).split(',')))).toEqual(new Set(ROLE_NAMES));
    for (const [name, service] of roles) {
      for (const dependency of INFRA)
        expect(service.depends_on?.[dependency], `${name} → ${dependency}`).toEqual({
          condition: 'service_healthy',
        });
      expect(service.depends_on?.migrate, `${name} → migrate`).toEqual({
        condition: 'service_completed_successfully',
      });
      expect(service.healthcheck?.test?.join(' '), name).toMatch(/\/readyz/);
      expect(Number.parseInt(service.stop_grace_period, 10), name).toBeGreaterThan(30);
    }
    for (const name of INFRA) expect(all[name]?.healthcheck?.test, name).toBeDefined();
  });

  it('publishes every port on 127.0.0.1 only', () => {
    const published = Object.values(all).flatMap((s) => (s.ports ?? []) as string[]);
    expect(published.length).toBeGreaterThan(0);
    for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it('builds the image once, runs migrations first, and pins every image', () => {
    const built = Object.entries(all).filter(([, s]) => s.build !== undefined);
    expect(built.map(([name]) => name)).toEqual(['migrate']);
    expect(all.migrate?.command).toEqual(['migrate']);
    for (const [name, service] of roles) {
      expect(service.build, name).toBeUndefined();
      expect(service.image, name).toBe(all.migrate?.image);
    }
    for (const [name, service] of Object.entries(all))
      if (service.image !== all.migrate?.image)
        expect(service.image, `${name}: a floating tag`).toMatch(/:v?\d+\.\d+(\.\d+)?(-[a-z0-9.]+)?$/);
  });

  it("publishes the ingress's admin port, where the operator UI is", () => {
    expect(all.ingress?.ports).toContain('127.0.0.1:9464:9464');
  });

  it('keeps the env files with secrets out of the image build context', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim());
    for (const secretFile of ['.env', 'requester.env']) expect(ignored).toContain(secretFile);
  });

  it('keeps the Kafka log on the volume', () => {
    const kafka = all.kafka as Service;
    const mount = String(kafka.volumes[0]).split(':')[1];
    expect(kafka.environment.KAFKA_LOG_DIRS).toBe(mount);
  });

  it('the schema check catches a broken file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'compose-'));
    try {
      const broken = join(dir, 'docker-compose.yml');
      writeFileSync(broken, text.replace('stop_grace_period: 45s', 'stop_grace_period: [45s]'));
      const result = lint(broken);
      expect(result.ok).toBe(false);
      expect(result.output).toMatch(/stop_grace_period/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
