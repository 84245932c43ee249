/**
 * The breaker key of a target, and which outcomes count against it: pure, called once or twice
 * per call by the executor, so nothing here touches Redis.
 */

/**
 * The breaker key of a target: `scheme://host:port` (default ports spelled out, so that
 * `https://a` and `https://a:443` share a breaker). Userinfo, path and query never enter it.
 */
export function originOf(uri: string | URL): string {
  if (typeof uri !== 'string' || uri.length > ORIGIN_CACHE_URI_MAX) return originOfUrl(new URL(uri));
  let origin = origins.get(uri);
  if (origin === undefined) {
    origin = originOfUrl(new URL(uri));
    if (origins.size >= ORIGIN_CACHE_SIZE) origins.clear();
    origins.set(uri, origin);
  }
  return origin;
}

function originOfUrl(url: URL): string {
  const port = url.port || DEFAULT_PORTS[url.protocol] || '';
  return `${url.protocol}//${url.hostname}${port ? `:${port}` : ''}`;
}

/**
 * The origins of the URIs called last: most calls go to a few endpoints, and a URL parse per call
 * for the same answer was a visible share of an executor's CPU. Bounded in entries and in
 * the length of a URI kept (a longer one is parsed each time).
 */
const origins = new Map<string, string>();
const ORIGIN_CACHE_SIZE = 1_000;
const ORIGIN_CACHE_URI_MAX = 512;

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * What `countsAsFailure` judges: the shape of an HTTP call's outcome (the executor's `CallOutcome`
 * is one), so that this package needs nothing of the executor's.
 */
export type JudgedOutcome =
  | { kind: 'response'; status: number }
  | { kind: 'failure'; error: { code: string } };

/**
 * The failures a breaker counts (the worker's default judgement): transport errors and timeouts,
 * 5xx, 429 and 408: the target is down, overloaded or too slow. Other answers, 4xx included, show
 * a live target; a refused (SSRF) or oversized call is not the target's fault.
 */
export function countsAsFailure(outcome: JudgedOutcome): boolean {
  if (outcome.kind === 'failure')
    return outcome.error.code === 'timeout' || outcome.error.code === 'transport_error';
  return outcome.status >= 500 || outcome.status === 429 || outcome.status === 408;
}
