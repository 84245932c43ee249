/**
 * A deliberately small JSON Schema (2020-12) validator for tests: just the keywords our emitted
 * schemas use. It throws on any other keyword, so a change in what zod emits is noticed here
 * instead of silently passing. Not for production use.
 */

type Schema = Record<string, unknown>;

const ANNOTATIONS = new Set(['$schema', '$id', 'title', 'description', 'examples', 'default', 'format']);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: unknown, type: unknown): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

function checkString(value: string, schema: Schema, path: string, errors: string[]): void {
  const length = [...value].length;
  if (typeof schema.minLength === 'number' && length < schema.minLength) errors.push(`${path}: minLength`);
  if (typeof schema.maxLength === 'number' && length > schema.maxLength) errors.push(`${path}: maxLength`);
  if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) {
    errors.push(`${path}: pattern`);
  }
}

function checkNumber(value: number, schema: Schema, path: string, errors: string[]): void {
  if (typeof schema.minimum === 'number' && value < schema.minimum) errors.push(`${path}: minimum`);
  if (typeof schema.maximum === 'number' && value > schema.maximum) errors.push(`${path}: maximum`);
  if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum) {
    errors.push(`${path}: exclusiveMinimum`);
  }
}

function checkArray(value: unknown[], schema: Schema, path: string, errors: string[]): void {
  if (typeof schema.minItems === 'number' && value.length < schema.minItems) errors.push(`${path}: minItems`);
  if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) errors.push(`${path}: maxItems`);
  if (!schema.items) return;
  for (const [i, item] of value.entries()) validateAt(item, schema.items as Schema, `${path}.${i}`, errors);
}

function checkObject(value: Record<string, unknown>, schema: Schema, path: string, errors: string[]): void {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  for (const key of (schema.required ?? []) as string[]) {
    if (!(key in value)) errors.push(`${path}.${key}: required`);
  }
  const keys = Object.keys(value);
  if (typeof schema.maxProperties === 'number' && keys.length > schema.maxProperties) {
    errors.push(`${path}: maxProperties`);
  }
  for (const key of keys) {
    const at = `${path}.${key}`;
    if (schema.propertyNames) validateAt(key, schema.propertyNames as Schema, `${at} (name)`, errors);
    const own = properties[key];
    if (own) validateAt(value[key], own, at, errors);
    else if (schema.additionalProperties === false) errors.push(`${at}: additionalProperties`);
    else if (typeof schema.additionalProperties === 'object') {
      validateAt(value[key], schema.additionalProperties as Schema, at, errors);
    }
  }
}

const KNOWN = new Set([
  ...ANNOTATIONS,
  'type',
  'enum',
  'properties',
  'required',
  'additionalProperties',
  'propertyNames',
  'maxProperties',
  'items',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'anyOf',
]);

function validateAt(value: unknown, schema: Schema, path: string, errors: string[]): void {
  const unknown = Object.keys(schema).filter((k) => !KNOWN.has(k));
  if (unknown.length > 0)
    throw new Error(`mini-json-schema does not support ${unknown.join(', ')} (at ${path})`);
  if (schema.type !== undefined && !matchesType(value, schema.type)) {
    errors.push(`${path}: type ${String(schema.type)}`);
    return;
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) errors.push(`${path}: enum`);
  if (
    Array.isArray(schema.anyOf) &&
    !(schema.anyOf as Schema[]).some((s) => validateJsonSchema(value, s).length === 0)
  )
    errors.push(`${path}: anyOf`);
  if (typeof value === 'string') checkString(value, schema, path, errors);
  else if (typeof value === 'number') checkNumber(value, schema, path, errors);
  else if (Array.isArray(value)) checkArray(value, schema, path, errors);
  else if (typeof value === 'object' && value !== null) {
    checkObject(value as Record<string, unknown>, schema, path, errors);
  }
}

/** Errors as `path: keyword`, empty when the value is valid. */
export function validateJsonSchema(value: unknown, schema: Schema): string[] {
  const errors: string[] = [];
  validateAt(value, schema, '$', errors);
  return errors;
}
