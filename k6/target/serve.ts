// The target of the k6 scenarios: the project's test target (packages/shared/src/testing/target.ts:
// /echo, /status/<n>, /slow/<ms>, /random-delay/<ms>, /flaky/<key>/<n>, ...) on a fixed port.
//   node k6/target/serve.ts [port]      (default 9000; Ctrl-C stops it)
import { startTarget } from '../../packages/shared/src/testing/target.ts';

const target = await startTarget(Number(process.argv[2] ?? 9000));
console.log(`target listening on ${target.url}`);
// Calls are recorded for tests; a long load run must not keep them all.
setInterval(() => target.calls.splice(0), 1000).unref();
process.on('SIGINT', () => void target.close().then(() => process.exit(0)));
