import type { ResultEnvelope } from '@requester/shared';
import {
  type CollectedSpan,
  createTestTopics,
  eventually,
  freePort,
  SPAN_KIND,
  startTarget,
  startTraceCollector,
  type Target,
  type TraceCollector,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropStackDatabase, type StackEnv, spawnRequester, stackEnv, waitReady } from './stack.fixture.ts';

/**
 * One request, served by roles in three processes (HTTP front, router + relay, executor), makes
 * ONE trace under the caller's `traceparent`: it is scheduled beyond the Redis horizon (a trip
 * through the outbox and the relay), and the target answers 503 then 200 (a retry through the
 * queue). Every span exported to a collector (a plain OTLP/HTTP receiver here) has the caller's
 * trace id and a parent that is either the caller's span or another span of the trace: one tree.
 */
describe('connected traces across processes', () => {
  const traceId = '0af7651916cd43dd8448eb211c80319c';
  const callerSpanId = 'b7ad6b7169203331';
  const traceparent = `00-${traceId}-${callerSpanId}-01`;
  let collector: TraceCollector;
  let target: Target;
  let stack: StackEnv;
  const processes: Array<ReturnType<typeof spawnRequester>> = [];

  /** The stack's environment with an admin port of its own, so several processes run side by side. */
  async function startRoles(roles: string): Promise<void> {
    const adminPort = await freePort();
    const own: StackEnv = {
      ...stack,
      env: { ...stack.env, ADMIN_PORT: String(adminPort) },
      adminUrl: `http://127.0.0.1:${adminPort}`,
    };
    processes.push(spawnRequester(own, roles));
    await waitReady(own);
  }

  beforeAll(async () => {
    collector = await startTraceCollector();
    target = await startTarget();
    stack = await stackEnv({
      AUTH: 'off',
      REDIS_HORIZON: '1s',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const { topicIn, topicOut, topicDlq } = stack.config;
    await createTestTopics([topicIn, topicOut, topicDlq], 3);
    // One after the other: the first one migrates the database.
    await startRoles('ingress,sync-gateway');
    await startRoles('router,relay');
    await startRoles('executor');
  }, 120_000);

  afterAll(async () => {
    for (const { child } of processes) child.kill('SIGTERM');
    await Promise.all(processes.map((p) => p.exited));
    await target?.close();
    await collector?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('exports one tree under the caller span, and the result and the target carry its trace id', async () => {
    const requestId = 'traced-1';
    const accepted = await fetch(`${stack.httpUrl}/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent },
      body: JSON.stringify({
        request: { uri: `${target.url}/flaky/${requestId}/1` },
        meta: {
          requestId,
          scheduled: new Date(Date.now() + 3_000).toISOString(),
          retry: { max: 3, delay: '200ms' },
        },
      }),
    });
    expect(accepted.status).toBe(202);
    const polled = await fetch(`${stack.httpUrl}/requests/${requestId}?wait=30s`, {
      headers: { traceparent },
    });
    expect(polled.status).toBe(200);
    const result = (await polled.json()) as ResultEnvelope;
    expect(result.response.status).toBe(200);
    expect(result.meta.tryCount).toBe(2);
    expect(result.meta.traceId).toBe(traceId);

    const trace = () => collector.spans.filter((span) => span.traceId === traceId);
    const named = (name: string) => trace().filter((span) => span.name === name);
    const { topicIn, topicOut } = stack.config;
    await eventually(
      async () => named(`receive ${topicOut}`).length === 1 && named('GET /requests/:id').length === 1,
      30_000,
      'the spans of the sync-gateway',
    );
    const spans = trace();
    const byId = new Map(spans.map((span) => [span.spanId, span]));
    const summary = spans.map((s) => `${s.service} ${s.name} ${s.spanId}<-${s.parentSpanId}`).join('\n');

    // One tree: the caller's span is the only parent outside the trace's spans.
    for (const span of spans)
      expect(byId.has(span.parentSpanId) || span.parentSpanId === callerSpanId, summary).toBe(true);
    expect(
      spans
        .filter((s) => s.parentSpanId === callerSpanId)
        .map((s) => s.name)
        .sort(),
    ).toEqual(['GET /requests/:id', 'POST /request']);
    // Every hop, in the process that serves it.
    const hop = (name: string, kind: number): CollectedSpan[] => named(name).filter((s) => s.kind === kind);
    expect(hop('POST /request', SPAN_KIND.server)[0]?.service).toBe('requester-ingress+sync-gateway');
    expect(hop('send in', SPAN_KIND.producer)).toHaveLength(1);
    // Routed twice: when it arrived (to the outbox), and when the relay brought it back.
    const routed = hop(`process ${topicIn}`, SPAN_KIND.consumer);
    expect(routed.map((s) => s.service)).toEqual(['requester-router+relay', 'requester-router+relay']);
    const relayed = hop(`send ${topicIn}`, SPAN_KIND.producer);
    expect(relayed).toHaveLength(1);
    expect(routed.map((s) => byId.get(s.parentSpanId)?.name).sort()).toEqual(
      [`send ${topicIn}`, 'send in'].sort(),
    );
    expect(named('queue wait')).toHaveLength(2);
    const attempts = named('execute');
    expect(attempts.map((s) => s.service)).toEqual(['requester-executor', 'requester-executor']);
    // The retry hangs under the first attempt, which put it back in the queue.
    expect(attempts.some((s) => byId.get(s.parentSpanId)?.name === 'execute')).toBe(true);
    const calls = hop('GET', SPAN_KIND.client);
    expect(calls.map((s) => s.attributes['http.response.status_code']).sort()).toEqual([200, 503]);
    for (const call of calls) {
      expect(call.attributes).toMatchObject({
        'http.request.method': 'GET',
        'url.full': `${target.url}/flaky/${requestId}/1`,
        'server.address': '127.0.0.1',
      });
      expect(byId.get(call.parentSpanId)?.name).toBe('execute');
    }
    const sent = hop(`send ${topicOut}`, SPAN_KIND.producer);
    expect(sent).toHaveLength(1);
    expect(byId.get(named(`receive ${topicOut}`)[0]?.parentSpanId ?? '')).toEqual(sent[0]);

    // The target was called in the same trace, as a child of each CLIENT span.
    const received = target.calls.map((call) => call.headers.traceparent);
    expect(received.sort()).toEqual(calls.map((call) => `00-${traceId}-${call.spanId}-01`).sort());
  }, 90_000);
});
