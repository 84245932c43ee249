/** The examples of docs/architecture.md §4, verbatim; tests clone them before changing anything. */

export function designRequestExample() {
  return {
    request: {
      uri: 'https://api.partner.example/orders',
      method: 'POST',
      body: '{"id":42}',
      headers: { 'content-type': 'application/json' },
    },
    meta: {
      requestId: 'ord-42-create',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      partition: '!order-42',
      sync: false,
      scheduled: '2026-12-01T09:00:00Z',
      proxyData: { service: 'billing', tenant: 't1' },
      limiter: {
        key: 'partner-a',
        algorithm: 'token-bucket',
        rates: [
          { duration: '1s', value: 10 },
          { duration: '1h', value: 20000 },
        ],
      },
      retry: { max: 5, delay: '200ms', maxDelay: '30s', multiplier: 2, jitter: 0.2 },
      cache: { key: 'fx-rates-usd', ttl: '5m' },
    },
  };
}

export function designResultExample() {
  return {
    response: { status: 200, body: '...', headers: { 'content-type': 'application/json' } },
    meta: {
      requestId: 'ord-42-create',
      tryCount: 1,
      time: 15230000,
      cached: false,
      waitTime: 0,
      proxyData: { service: 'billing', tenant: 't1' },
    },
  };
}
