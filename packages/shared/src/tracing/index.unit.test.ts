import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import {
  firstTraceparent,
  initTracing,
  inSpan,
  newTraceparent,
  shutdownTracing,
  startSpan,
  traceIdOf,
  traceparentHeader,
  traceparentOf,
  untracedTraceparent,
} from './index.ts';

/** Spans reach an OTLP/HTTP collector (a real local server here) and continue the caller's trace. */
describe('tracing', () => {
  const bodies: string[] = [];
  const collector = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      if (req.url === '/v1/traces') bodies.push(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  afterAll(() => new Promise<void>((resolve) => collector.close(() => resolve())));

  it('makes W3C traceparents', () => {
    expect(newTraceparent()).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(newTraceparent()).not.toBe(newTraceparent());
  });

  it('reads traceparents, skipping invalid ones, and hands a parent on with tracing off', () => {
    const valid = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(traceIdOf(valid)).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    for (const invalid of [
      undefined,
      'junk',
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      valid.replace(/^00/, 'ff'),
    ])
      expect(traceIdOf(invalid)).toBeUndefined();
    expect(firstTraceparent('junk', undefined, valid)).toBe(valid);
    expect(traceparentHeader({ traceparent: [Buffer.from(valid), 'other'] })).toBe(valid);
    // No provider: a non-recording span with its parent's context, so the trace id still travels.
    expect(traceparentOf(startSpan('x', valid, {}))).toBe(valid);
    expect(traceparentOf(startSpan('x', undefined, {}))).toBeUndefined();
  });

  it('gives with tracing off the traceparent a span under the parent would carry, the span skipped', () => {
    const valid = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    for (const parent of [
      valid,
      ` ${valid.toUpperCase()} `,
      `${valid.slice(0, -2)}03`,
      `${valid}-extra`,
      valid.replace(/^00/, 'ff'),
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      'junk',
      undefined,
    ]) {
      const span = startSpan('x', parent, {});
      expect(untracedTraceparent(parent)).toBe(traceparentOf(span) ?? parent);
    }
    expect(untracedTraceparent(` ${valid.toUpperCase()} `)).toBe(valid);
  });

  it('exports spans that continue the trace of meta.traceparent', async () => {
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const { port } = collector.address() as AddressInfo;
    await initTracing('requester-test', `http://127.0.0.1:${port}`);
    const traceparent = newTraceparent();
    const traceId = traceparent.split('-')[1] as string;
    const value = await inSpan(
      'test.work',
      traceparent,
      { attributes: { requestId: 'r-1' } },
      async () => 42,
    );
    expect(value).toBe(42);
    await shutdownTracing(); // flushes the batch
    const exported = bodies.join('\n');
    expect(exported).toContain('test.work');
    expect(exported).toContain('requester-test');
    expect(exported.toLowerCase()).toContain(traceId);
  });
});
