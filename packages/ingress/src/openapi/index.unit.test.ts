import { requestJsonSchema } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import { silent } from '../../test/kit.fixture.ts';
import { createApi } from '../api/index.ts';
import { openAccess } from '../auth/index.ts';
import { openApiDocument } from './index.ts';

type Json = Record<string, unknown>;

/** Every `$ref` in the document, so each can be checked to resolve. */
function refs(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) refs(item, found);
  else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.push(value);
      else refs(value, found);
    }
  }
  return found;
}

function resolve(doc: Json, ref: string): unknown {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
}

describe('GET /openapi.json', () => {
  it('serves an OpenAPI 3.1 document built from the shared request schema', async () => {
    const res = await createApi(
      {},
      { maxBodyBytes: 1, syncTimeoutMs: 1, longPollMaxMs: 1, access: openAccess() },
      silent,
    ).request('/openapi.json');
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Json & { paths: Json; components: { schemas: Json } };
    expect(doc['openapi']).toBe('3.1.0');
    expect(doc).toMatchObject({ info: { title: 'Requester' } });

    const { $schema: _s, $id: _i, ...request } = requestJsonSchema();
    expect(doc.components.schemas['RequestEnvelope']).toEqual(request);
    expect(doc.components.schemas['ResultEnvelope']).toMatchObject({ type: 'object' });

    expect(
      Object.keys((doc.paths['/request'] as { post: { responses: Json } }).post.responses).sort(),
    ).toEqual(['200', '202', '400', '401', '403', '409', '413', '415', '429', '503']);
    expect(
      Object.keys((doc.paths['/requests/{id}'] as { get: { responses: Json } }).get.responses).sort(),
    ).toEqual(['200', '400', '401', '403', '404', '429', '503']);
    for (const ref of refs(doc)) expect(resolve(doc, ref), ref).toBeDefined();
    // Every operation needs an API key (Authorization: Bearer rqk_…).
    expect(doc['security']).toEqual([{ apiKey: [] }]);
    expect(doc.components).toMatchObject({ securitySchemes: { apiKey: { type: 'http', scheme: 'bearer' } } });
  });

  it('documents the request body and the result of both routes by reference', () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, Json>> };
    const body = doc.paths['/request']?.['post']?.['requestBody'];
    expect(refs(body)).toEqual(['#/components/schemas/RequestEnvelope']);
    expect(refs(doc.paths['/requests/{id}']?.['get'])).toContain('#/components/schemas/ResultEnvelope');
  });
});
