import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { GO_DURATION_PATTERN } from '../time/duration.ts';
import {
  contractFiles,
  type JsonSchema,
  openApiComponents,
  REQUEST_SCHEMA_ID,
  RESULT_SCHEMA_ID,
  requestJsonSchema,
  resultJsonSchema,
} from './json-schema.ts';
import { safeParseRequestEnvelope } from './request.ts';
import { errorResult, wakeUpResult } from './result.ts';
import { designRequestExample, designResultExample } from './testing/examples.ts';
import { validateJsonSchema } from './testing/mini-json-schema.ts';

const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
const script = join(repoRoot, 'packages/shared/scripts/emit-contracts.ts');

/** Every object-valued `properties` entry, with its dotted path. */
function* propertiesOf(schema: JsonSchema, path = ''): Generator<[string, JsonSchema]> {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  for (const [name, child] of Object.entries(properties)) {
    const at = path ? `${path}.${name}` : name;
    yield [at, child];
    yield* propertiesOf(child, at);
    if (child.items) yield* propertiesOf(child.items as JsonSchema, `${at}.0`);
  }
}

function withChange(change: (e: ReturnType<typeof designRequestExample>) => void): unknown {
  const envelope = designRequestExample();
  change(envelope);
  return envelope;
}

describe('request.schema.json', () => {
  const schema = requestJsonSchema();

  it('is draft 2020-12 with an $id and a title', () => {
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(schema.$id).toBe(REQUEST_SCHEMA_ID);
    expect(schema.title).toBe('RequestEnvelope');
  });

  it('describes every field', () => {
    const undocumented = [...propertiesOf(schema)].filter(([, s]) => typeof s.description !== 'string');
    expect(undocumented.map(([path]) => path)).toEqual([]);
  });

  it('documents durations with a pattern', () => {
    const rates = [...propertiesOf(schema)].find(([path]) => path === 'meta.limiter.rates.0.duration')?.[1];
    expect(rates?.pattern).toMatch(/ns\|us\|µs\|μs\|ms\|s\|m\|h/);
    expect(new RegExp(String(rates?.pattern), 'u').test('2h45m')).toBe(true);
    expect(new RegExp(String(rates?.pattern), 'u').test('5x')).toBe(false);
    expect(GO_DURATION_PATTERN).toContain('[-+]?'); // the general grammar keeps the sign
  });

  it('lists the limiter algorithms', () => {
    const algorithm = [...propertiesOf(schema)].find(([path]) => path === 'meta.limiter.algorithm')?.[1];
    expect(algorithm?.enum).toEqual([
      'token-bucket',
      'leaky-bucket',
      'fixed-window-counter',
      'sliding-window-log',
      'sliding-window-counter',
    ]);
  });

  it('validates the docs/architecture.md §4 example', () => {
    expect(validateJsonSchema(designRequestExample(), schema)).toEqual([]);
  });

  it('validates a minimal wake-up (method and retry defaults are optional)', () => {
    expect(
      validateJsonSchema({ request: { uri: '' }, meta: { requestId: 'a', retry: { max: 2 } } }, schema),
    ).toEqual([]);
  });

  // Rules a JSON Schema can express: the published schema and the zod validator must agree.
  it.each<[string, unknown]>([
    ['missing requestId', withChange((e) => Reflect.deleteProperty(e.meta, 'requestId'))],
    ['unknown algorithm', withChange((e) => Object.assign(e.meta.limiter, { algorithm: 'gcra' }))],
    ['bad duration', withChange((e) => Object.assign(e.meta.cache, { ttl: '5x' }))],
    ['unknown key', withChange((e) => Object.assign(e.meta, { retries: 3 }))],
    ['wrong type', withChange((e) => Object.assign(e.meta.retry, { max: '5' }))],
    ['bad uri scheme', withChange((e) => Object.assign(e.request, { uri: 'ftp://x.example/' }))],
    ['lower-case method', withChange((e) => Object.assign(e.request, { method: 'post' }))],
    ['bad header name', withChange((e) => Object.assign(e.request, { headers: { 'a b': 'c' } }))],
    ['bad traceparent', withChange((e) => Object.assign(e.meta, { traceparent: 'nope' }))],
    ['time without offset', withChange((e) => Object.assign(e.meta, { scheduled: '2026-12-01T09:00:00' }))],
    ['negative delay', withChange((e) => Object.assign(e.meta.retry, { delay: '-1s' }))],
    ['jitter above 1', withChange((e) => Object.assign(e.meta.retry, { jitter: 2 }))],
    ['empty rates', withChange((e) => Object.assign(e.meta.limiter, { rates: [] }))],
  ])('refuses %s, as the validator does', (_name, input) => {
    expect(validateJsonSchema(input, schema)).not.toEqual([]);
    expect(safeParseRequestEnvelope(input).ok).toBe(false);
  });
});

describe('result.schema.json', () => {
  const schema = resultJsonSchema();

  it('is draft 2020-12 with an $id and a title, and describes every field', () => {
    expect(schema.$id).toBe(RESULT_SCHEMA_ID);
    expect(schema.title).toBe('ResultEnvelope');
    const undocumented = [...propertiesOf(schema)].filter(([, s]) => typeof s.description !== 'string');
    expect(undocumented.map(([path]) => path)).toEqual([]);
  });

  it('does not forbid fields added later', () => {
    expect(schema.additionalProperties).toBeUndefined();
  });

  it('validates the docs/architecture.md §4 example and the synthetic results', () => {
    expect(validateJsonSchema(designResultExample(), schema)).toEqual([]);
    const issues = [{ path: 'meta.requestId', message: 'required' }];
    expect(validateJsonSchema(errorResult(undefined, 'invalid_request', 'x', { issues }), schema)).toEqual(
      [],
    );
    const wakeUp = { request: { uri: '', method: 'GET' }, meta: { requestId: 'w' } };
    expect(validateJsonSchema(wakeUpResult(wakeUp, { tryCount: 1 }), schema)).toEqual([]);
  });

  it('refuses a fractional nanosecond count', () => {
    const result = designResultExample();
    result.meta.time = 1.5;
    expect(validateJsonSchema(result, schema)).toContain('$.meta.time: type integer');
  });
});

describe('openApiComponents', () => {
  it('holds both envelopes as OpenAPI 3.1 schema objects', () => {
    const { schemas } = openApiComponents();
    expect(Object.keys(schemas)).toEqual(['RequestEnvelope', 'ResultEnvelope', 'JournalEvent']);
    expect(schemas.RequestEnvelope.$schema).toBeUndefined();
    expect(schemas.RequestEnvelope.$id).toBeUndefined();
    expect(schemas.RequestEnvelope.properties).toEqual(requestJsonSchema().properties);
  });
});

describe('contracts/ files', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'contracts-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('are up to date with the zod schemas', () => {
    for (const { fileName, text } of contractFiles()) {
      expect(readFileSync(join(repoRoot, 'contracts', fileName), 'utf8'), fileName).toBe(text);
    }
  });

  it('pass `contracts:check`', () => {
    const output = execFileSync(process.execPath, [script, '--check'], { encoding: 'utf8' });
    expect(output).toContain('up to date');
  });

  it('`--check` fails with a clear message when a file is stale, and emit fixes it', () => {
    execFileSync(process.execPath, [script, '--dir', scratch]);
    writeFileSync(join(scratch, 'result.schema.json'), '{}\n');
    const stale = spawnSync(process.execPath, [script, '--check', '--dir', scratch], { encoding: 'utf8' });
    expect(stale.status).toBe(1);
    expect(stale.stderr).toContain('contracts/result.schema.json');
    expect(stale.stderr).toContain('pnpm run contracts:emit');
    execFileSync(process.execPath, [script, '--dir', scratch]);
    expect(spawnSync(process.execPath, [script, '--check', '--dir', scratch]).status).toBe(0);
  });
});
