import { check } from 'k6';
import exec from 'k6/execution';
import http, { type RefinedResponse } from 'k6/http';

/**
 * What every scenario shares: where Requester and the target are, the API key, and how an
 * envelope is submitted. The target is `k6/target.ts` (the project's test target on a fixed port).
 */
export const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
export const TARGET = __ENV.TARGET || 'http://127.0.0.1:9000';
const API_KEY = __ENV.API_KEY || '';

/** The request envelope (contracts/request.schema.json), the fields these scenarios use. */
export interface Envelope {
  request: { uri: string; method?: string; body?: string; headers?: Record<string, string> };
  meta: {
    requestId: string;
    partition?: string;
    sync?: boolean;
    proxyData?: unknown;
    limiter?: { key: string; algorithm: string; rates: Array<{ duration: string; value: number }> };
    retry?: { max: number; delay?: string; maxDelay?: string; multiplier?: number; jitter?: number };
    cache?: { key: string; ttl: string };
  };
}

/** The result envelope of a sync reply (contracts/result.schema.json), the fields checked here. */
export interface Result {
  response: { status: number; body?: string };
  meta: { requestId: string; tryCount: number; cached: boolean; waitTime: number };
}

/** A requestId unique in the test run (and across runs: the dedup window would refuse a reuse). */
export function uniqueId(prefix: string): string {
  return `k6-${prefix}-${Date.now().toString(36)}-${exec.vu.idInTest}-${exec.scenario.iterationInTest}`;
}

export function submit(envelope: Envelope, tags: Record<string, string> = {}): RefinedResponse<'text'> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (API_KEY) headers.authorization = `Bearer ${API_KEY}`;
  return http.post(`${BASE_URL}/request`, JSON.stringify(envelope), { headers, tags });
}

/** Submits a sync request and returns its result, or undefined when it did not come back as 200. */
export function submitSync(envelope: Envelope, tags: Record<string, string> = {}): Result | undefined {
  const res = submit({ ...envelope, meta: { ...envelope.meta, sync: true } }, tags);
  check(res, { 'sync answered 200': (r) => r.status === 200 });
  return res.status === 200 ? (res.json() as unknown as Result) : undefined;
}

export function accepted(res: RefinedResponse<'text'>): void {
  check(res, { 'accepted (202)': (r) => r.status === 202 });
}
