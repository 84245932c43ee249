/**
 * Writes the client's contract types (`src/contract/generated.ts`) from the published JSON Schemas
 * in `contracts/`, or with `--check` fails when the checked-in file differs from what they generate
 * (`pnpm run client:check`, part of `pnpm run check`): a contract field added in zod reaches the
 * client by `pnpm run contracts:emit && pnpm run client:emit`, never by hand.
 *
 *   node packages/client/scripts/gen-types.ts [--check]
 *
 * A deliberately small converter: it covers the keywords the contract's schemas use (objects,
 * arrays, enums, consts, oneOf/anyOf, `$ref` by `$id`) and fails on any other, so a schema that
 * grows a new construct cannot be turned into a silently wrong type.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeOrCheck } from '../../shared/scripts/generated-files.ts';

type Schema = Record<string, unknown>;

const root = fileURLToPath(new URL('../../../', import.meta.url));
const target = fileURLToPath(new URL('../src/contract/generated.ts', import.meta.url));

/** The files turned into types, and the name of each root type. */
const SOURCES = [
  { file: 'request.schema.json', name: 'RequestEnvelope' },
  { file: 'result.schema.json', name: 'ResultEnvelope' },
  { file: 'event.schema.json', name: 'JournalEvent' },
] as const;

/** Keywords that constrain values but not their TypeScript type. */
const VALUE_KEYWORDS = new Set([
  '$schema',
  '$id',
  'title',
  'description',
  'default',
  'examples',
  'pattern',
  'format',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minItems',
  'maxItems',
  'maxProperties',
  'propertyNames',
  'required',
  'contentEncoding',
]);

const TYPE_KEYWORDS = new Set([
  'type',
  'properties',
  'additionalProperties',
  'items',
  'enum',
  'const',
  'oneOf',
  'anyOf',
  '$ref',
]);

interface Declaration {
  name: string;
  text: string;
}

/**
 * The members of a oneOf/anyOf that is a union of types. One whose members only add constraints
 * to the schema's own properties (`{ required: ['quota'] }`: "at least one of") changes no type.
 */
function unionOf(schema: Schema): Schema[] | undefined {
  const members = (schema.oneOf ?? schema.anyOf) as Schema[] | undefined;
  const typed = (member: Schema) => ['type', '$ref', 'const', 'enum', 'title'].some((k) => k in member);
  return members?.some(typed) || !isObjectSchema(schema) ? members : undefined;
}

class Generator {
  readonly declarations: Declaration[] = [];
  readonly #names = new Map<string, string>();
  readonly #idToName: Map<string, string>;

  constructor(idToName: Map<string, string>) {
    this.#idToName = idToName;
  }

  /** A named interface (or type alias) for `schema`, returning its name. */
  declare(name: string, schema: Schema, path: string): string {
    const taken = this.#names.get(name);
    const text = this.#declaration(name, schema, path);
    if (taken !== undefined) {
      if (taken !== text) throw new Error(`${path}: two different types are titled ${name}`);
      return name;
    }
    this.#names.set(name, text);
    this.declarations.push({ name, text });
    return name;
  }

  #declaration(name: string, schema: Schema, path: string): string {
    const doc = jsdoc(schema, '');
    if (isObjectSchema(schema) && !unionOf(schema)) {
      return `${doc}export interface ${name} ${this.#objectBody(schema, path, '')}\n`;
    }
    return `${doc}export type ${name} = ${this.type(schema, path, '')};\n`;
  }

  type(schema: Schema, path: string, indent: string): string {
    for (const key of Object.keys(schema)) {
      if (!VALUE_KEYWORDS.has(key) && !TYPE_KEYWORDS.has(key))
        throw new Error(`${path}: the keyword ${JSON.stringify(key)} is not supported by gen-types.ts`);
    }
    if (typeof schema.$ref === 'string') {
      const name = this.#idToName.get(schema.$ref);
      if (!name) throw new Error(`${path}: $ref ${schema.$ref} names no contract file`);
      return name;
    }
    const union = unionOf(schema);
    if (union) {
      return union
        .map((member, i) => {
          const title = typeof member.title === 'string' ? member.title : memberName(member);
          return title
            ? this.declare(title, member, `${path}|${i}`)
            : this.type(member, `${path}|${i}`, indent);
        })
        .join(' | ');
    }
    if ('const' in schema) return JSON.stringify(schema.const);
    if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
    if (typeof schema.title === 'string' && isObjectSchema(schema))
      return this.declare(schema.title, schema, path);
    switch (schema.type) {
      case undefined:
        return 'unknown';
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array': {
        const item = this.type((schema.items ?? {}) as Schema, `${path}[]`, indent);
        return /[ |]/.test(item) ? `Array<${item}>` : `${item}[]`;
      }
      case 'object':
        return this.#objectBody(schema, path, indent);
      default:
        throw new Error(`${path}: type ${JSON.stringify(schema.type)} is not supported by gen-types.ts`);
    }
  }

  #objectBody(schema: Schema, path: string, indent: string): string {
    const properties = (schema.properties ?? {}) as Record<string, Schema>;
    const required = new Set((schema.required ?? []) as string[]);
    const inner = `${indent}  `;
    const lines: string[] = [];
    for (const [key, property] of Object.entries(properties)) {
      const optional = required.has(key) ? '' : '?';
      lines.push(
        `${jsdoc(property, inner)}${inner}${propertyKey(key)}${optional}: ${this.type(property, `${path}.${key}`, inner)};`,
      );
    }
    const extra = schema.additionalProperties;
    if (extra !== undefined && extra !== false && extra !== true) {
      lines.push(`${inner}[name: string]: ${this.type(extra as Schema, `${path}{}`, inner)};`);
    }
    if (lines.length === 0) return extra === false ? 'Record<string, never>' : 'Record<string, unknown>';
    return `{\n${lines.join('\n')}\n${indent}}`;
  }
}

function isObjectSchema(schema: Schema): boolean {
  return schema.type === 'object' && schema.properties !== undefined;
}

/** A journal event's member is named after its `type` constant: `accepted` → `AcceptedEvent`. */
function memberName(member: Schema): string | undefined {
  const type = (member.properties as Record<string, Schema> | undefined)?.type?.const;
  if (typeof type !== 'string') return undefined;
  return `${type.replace(/(^|_)([a-z])/g, (_m, _s, c: string) => c.toUpperCase())}Event`;
}

function propertyKey(key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
}

function jsdoc(schema: Schema, indent: string): string {
  const parts: string[] = [];
  if (typeof schema.description === 'string') parts.push(schema.description);
  if (schema.default !== undefined) parts.push(`@default ${JSON.stringify(schema.default)}`);
  if (parts.length === 0) return '';
  const text = parts.join('\n\n').replaceAll('*/', '*\\/');
  const lines = text.split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l === '' ? '' : ` ${l}`}`).join('\n')}\n${indent} */\n`;
}

export function generate(): string {
  const schemas = SOURCES.map(({ file, name }) => ({
    name,
    schema: JSON.parse(readFileSync(`${root}contracts/${file}`, 'utf8')) as Schema,
  }));
  const idToName = new Map(schemas.map(({ name, schema }) => [String(schema.$id), name]));
  const generator = new Generator(idToName);
  for (const { name, schema } of schemas) generator.declare(name, schema, name);
  const header = [
    '// Generated by packages/client/scripts/gen-types.ts from contracts/*.schema.json: do not edit.',
    '// `pnpm run client:emit` writes it again; `pnpm run client:check` fails when it is out of date.',
    '',
  ].join('\n');
  return formatted(`${header}\n${generator.declarations.map((d) => d.text).join('\n')}`);
}

/** Through the repository's formatter, so that the file passes `biome check` as generated. */
function formatted(text: string): string {
  return execFileSync(`${root}node_modules/.bin/biome`, ['format', `--stdin-file-path=${target}`], {
    cwd: root,
    input: text,
    encoding: 'utf8',
  });
}

process.exitCode = writeOrCheck(
  [
    {
      path: target,
      label: 'packages/client/src/contract/generated.ts (from contracts/*.schema.json)',
      text: generate(),
    },
  ],
  {
    check: process.argv.includes('--check'),
    emitCommand: 'pnpm run client:emit',
  },
);
