import { parseRequestEnvelope, safeParseRequestEnvelope } from '@requester/shared/contract';
import { describe, expect, it } from 'vitest';
import {
  applyDestination,
  type Destination,
  destinationBreakerKey,
  destinationConcurrencyKey,
  destinationGatesOf,
  destinationLimiterKey,
  parseDestinationSpec,
  pinnedRetry,
  pinnedTimeout,
} from './index.ts';

const destination: Destination = {
  name: 'partner-billing',
  version: 4,
  spec: parseDestinationSpec({
    baseUrl: 'https://api.partner.example/v2',
    headers: { 'X-Partner': 'requester' },
    credentials: 'billing-oauth',
    limiter: { algorithm: 'token-bucket', rates: [{ duration: '1s', value: 5 }] },
    retry: { max: 3, delay: '2s' },
    maxBodyBytes: 10,
  }),
};

const envelope = (uri: string, meta: Record<string, unknown> = {}, request: Record<string, unknown> = {}) =>
  parseRequestEnvelope({
    request: { uri, ...request },
    meta: { requestId: 'r1', destination: 'partner-billing', ...meta },
  });

describe('meta.destination in the contract', () => {
  it.each([
    ['https://api.partner.example/v2/x', /relative/],
    ['', /relative/],
    ['//evil.example/x', /single "\/"/],
    ['/a/../../x', /"\.\." segments/],
    ['/a/%2e%2e/x', /"\.\." segments/],
    ['/a/%2E%2e/x', /"\.\." segments/],
    ['/./x', /segments/],
    ['/a\\b', /backslash/],
  ])('refuses %j', (uri, message) => {
    const parsed = safeParseRequestEnvelope({ request: { uri }, meta: { requestId: 'r', destination: 'd' } });
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error.issues.map((i) => `${i.path}: ${i.message}`).join('\n')).toMatch(message);
  });

  it('refuses a relative URI without a destination, and meta.credentials with one', () => {
    expect(safeParseRequestEnvelope({ request: { uri: '/x' }, meta: { requestId: 'r' } }).ok).toBe(false);
    const parsed = safeParseRequestEnvelope({
      request: { uri: '/x' },
      meta: { requestId: 'r', destination: 'd', credentials: 'c' },
    });
    expect(parsed.ok).toBe(false);
  });
});

describe('applyDestination', () => {
  it('builds the URL under the base, pins headers, credential, limiter and retries', () => {
    const resolved = applyDestination(
      envelope(
        '/invoices?x=1',
        {
          limiter: { key: 'mine', algorithm: 'token-bucket', rates: [{ duration: '1s', value: 500 }] },
          retry: { max: 10, delay: '1ms' },
        },
        { headers: { 'x-partner': 'forged', accept: 'application/json' } },
      ),
      destination,
    );
    expect(resolved.ok).toBe(true);
    if (!resolved.ok) return;
    expect(resolved.applied).toEqual({
      name: 'partner-billing',
      version: 4,
      limiters: ['caller', 'destination'],
      retryMax: 3,
    });
    expect(resolved.envelope.request.uri).toBe('https://api.partner.example/v2/invoices?x=1');
    expect(resolved.envelope.request.headers).toEqual({
      accept: 'application/json',
      'X-Partner': 'requester',
    });
    expect(resolved.envelope.meta.credentials).toBe('billing-oauth');
    // The caller's own limit stays, beside the destination's (the executor takes that one from its gates).
    expect(resolved.envelope.meta.limiter).toEqual({
      key: 'mine',
      algorithm: 'token-bucket',
      rates: [{ duration: '1s', value: 500 }],
    });
    expect(resolved.envelope.meta.retry).toMatchObject({ max: 3, delay: '2s' });
  });

  it("counts the caller's cost units against the destination's quota, refusing units it could never admit", () => {
    const limiter = (cost: number) => ({
      key: 'mine',
      algorithm: 'token-bucket',
      rates: [{ duration: '1s', value: 500 }],
      cost,
    });
    const fits = applyDestination(envelope('/x', { limiter: limiter(3) }), destination);
    expect(fits.ok && fits.envelope.meta.limiter).toMatchObject({ key: 'mine', cost: 3 });
    const tooMany = applyDestination(envelope('/x', { limiter: limiter(6) }), destination);
    expect(tooMany).toMatchObject({ ok: false, path: 'meta.limiter.cost' });
  });

  it('lets a caller ask for fewer attempts, never more', () => {
    const pinned = destination.spec.retry;
    expect(
      pinnedRetry({ max: 2, delay: '5s', maxDelay: '5m', multiplier: 3, jitter: 0 }, pinned),
    ).toMatchObject({
      max: 2,
      delay: '5s',
      multiplier: 3,
    });
    expect(
      pinnedRetry({ max: 50, delay: '0s', maxDelay: '1s', multiplier: 1, jitter: 0 }, pinned),
    ).toMatchObject({
      max: 3,
      delay: '2s',
      maxDelay: '5m',
      multiplier: 2,
    });
    // No retry policy on the destination: one attempt, whatever the caller asks.
    expect(
      pinnedRetry({ max: 5, delay: '1s', maxDelay: '5m', multiplier: 2, jitter: 0 }, undefined),
    ).toBeUndefined();
  });

  it("pins the destination's concurrency key and limit in place of the caller's, shared by every client", () => {
    const capped: Destination = {
      ...destination,
      spec: parseDestinationSpec({ baseUrl: 'https://api.partner.example', maxConcurrency: 4 }),
    };
    const own = { concurrency: { key: 'mine', limit: 2 } };
    for (const meta of [{}, own, { ...own, client: 'team-a' }]) {
      const resolved = applyDestination(envelope('/x', meta), capped);
      expect(resolved.ok && resolved.envelope.meta.concurrency).toEqual({
        key: destinationConcurrencyKey('partner-billing'),
        limit: 4,
      });
    }
    // No cap on the destination: the caller's own key stays.
    const open = applyDestination(envelope('/x', own), {
      ...destination,
      spec: parseDestinationSpec({ baseUrl: 'https://api.partner.example' }),
    });
    expect(open.ok && open.envelope.meta.concurrency).toEqual(own.concurrency);
    // No caller can name the destination's key: it is not a printable id.
    expect(
      safeParseRequestEnvelope({
        request: { uri: 'https://a.example/' },
        meta: { requestId: 'r', concurrency: { key: destinationConcurrencyKey('x'), limit: 1 } },
      }).ok,
    ).toBe(false);
  });

  it('applies the destination timeout, or a shorter one the caller asks for, never a longer one', () => {
    expect(pinnedTimeout(undefined, '2s')).toBe('2s');
    expect(pinnedTimeout('500ms', '2s')).toBe('500ms');
    expect(pinnedTimeout('1m', '2s')).toBe('2s');
    expect(pinnedTimeout('3s', undefined)).toBe('3s');
    expect(pinnedTimeout(undefined, undefined)).toBeUndefined();
    const timed: Destination = {
      ...destination,
      spec: parseDestinationSpec({ baseUrl: 'https://api.partner.example', timeout: '2s' }),
    };
    const longer = applyDestination(envelope('/x', { timeout: '30s' }), timed);
    expect(longer.ok && longer.envelope.meta.timeout).toBe('2s');
    const shorter = applyDestination(envelope('/x', { timeout: '100ms' }), timed);
    expect(shorter.ok && shorter.envelope.meta.timeout).toBe('100ms');
    expect(() => parseDestinationSpec({ baseUrl: 'https://a.example', timeout: '0s' })).toThrow(/timeout/);
    expect(() => parseDestinationSpec({ baseUrl: 'https://a.example', maxConcurrency: 0 })).toThrow(
      /maxConcurrency/,
    );
  });

  it('refuses a body over the destination limit and a Host header', () => {
    expect(applyDestination(envelope('/x', {}, { body: 'x'.repeat(11) }), destination)).toMatchObject({
      ok: false,
      path: 'request.body',
    });
    expect(
      applyDestination(envelope('/x', {}, { headers: { Host: 'evil.example' } }), destination),
    ).toMatchObject({
      ok: false,
      path: 'request.headers',
    });
  });
});

describe('what a destination pins for the gates (destinationGatesOf)', () => {
  it('without settings: the origin’s breaker, pacing on', () => {
    expect(destinationGatesOf(destination)).toEqual({
      name: 'partner-billing',
      pacing: true,
      limiter: {
        key: destinationLimiterKey('partner-billing'),
        algorithm: 'token-bucket',
        rates: [{ duration: '1s', value: 5 }],
      },
    });
  });

  it('the result names the limits that applied: the caller’s, the destination’s, both or none', () => {
    const own = { key: 'mine', algorithm: 'token-bucket', rates: [{ duration: '1s', value: 2 }] };
    const bare = { ...destination, spec: parseDestinationSpec({ baseUrl: 'https://api.partner.example' }) };
    const applied = (meta: Record<string, unknown>, to: typeof destination) => {
      const resolved = applyDestination(envelope('/x', meta), to);
      return resolved.ok ? resolved.applied.limiters : 'refused';
    };
    expect(applied({ limiter: own }, destination)).toEqual(['caller', 'destination']);
    expect(applied({}, destination)).toEqual(['destination']);
    expect(applied({ limiter: own }, bare)).toEqual(['caller']);
    expect(applied({}, bare)).toBeUndefined();
  });

  it('the result states the retries and timeout that applied, and which of them the caller lowered', () => {
    const timed = { ...destination, spec: { ...destination.spec, timeout: '2s' } };
    const bare = { ...destination, spec: parseDestinationSpec({ baseUrl: 'https://api.partner.example' }) };
    const applied = (meta: Record<string, unknown>, to: typeof destination) => {
      const resolved = applyDestination(envelope('/x', meta), to);
      if (!resolved.ok) return 'refused';
      const { retryMax, timeout, lowered } = resolved.applied;
      return { retryMax, timeout, lowered };
    };
    expect(applied({}, timed)).toEqual({ retryMax: 3, timeout: '2s', lowered: undefined });
    expect(applied({ retry: { max: 2 }, timeout: '500ms' }, timed)).toEqual({
      retryMax: 2,
      timeout: '500ms',
      lowered: ['retry', 'timeout'],
    });
    // Longer pauses are less too; asking for more is not granted, so nothing was lowered.
    expect(applied({ retry: { max: 3, delay: '10s' } }, timed)).toEqual({
      retryMax: 3,
      timeout: '2s',
      lowered: ['retry'],
    });
    expect(applied({ retry: { max: 9, delay: '0s' }, timeout: '1m' }, timed)).toEqual({
      retryMax: 3,
      timeout: '2s',
      lowered: undefined,
    });
    // Without a retry policy or timeout of the destination: one attempt, the caller's timeout.
    expect(applied({ retry: { max: 5 }, timeout: '1s' }, bare)).toEqual({
      retryMax: undefined,
      timeout: '1s',
      lowered: undefined,
    });
  });

  it('breaker settings make a breaker of its own, its durations in ms; a field left out is the deployment’s', () => {
    const spec = parseDestinationSpec({
      baseUrl: 'https://api.partner.example',
      breaker: { failureThreshold: 2, openDuration: '1m' },
      pacing: false,
    });
    expect(destinationGatesOf({ name: 'strict', spec })).toEqual({
      name: 'strict',
      pacing: false,
      breaker: { key: destinationBreakerKey('strict'), failureThreshold: 2, openMs: 60_000 },
    });
    // No URL can be its key: its state is apart from every origin's.
    expect(URL.parse(destinationBreakerKey('strict'))).toBeNull();
  });

  it.each([
    [{ failureThreshold: 0 }, /breaker.failureThreshold/],
    [{ failureThreshold: 1.5 }, /breaker.failureThreshold/],
    [{ openDuration: '0s' }, /breaker.openDuration/],
    [{ maxOpenDuration: 'soon' }, /breaker.maxOpenDuration/],
    [{ threshold: 3 }, /breaker/],
  ])('refuses breaker settings %j', (breaker, message) => {
    expect(() => parseDestinationSpec({ baseUrl: 'https://api.partner.example', breaker })).toThrow(message);
  });

  it('a request’s meta cannot carry breaker settings: the contract refuses the field', () => {
    expect(
      safeParseRequestEnvelope({
        request: { uri: '/x' },
        meta: { requestId: 'r1', destination: 'partner-billing', breaker: { failureThreshold: 100 } },
      }).ok,
    ).toBe(false);
  });
});
