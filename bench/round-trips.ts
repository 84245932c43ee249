// Counts a process's Redis commands (scripts by name), Kafka requests (by API) and socket writes
// (by remote port), in the process itself: Redis's INFO commandstats is shared by everything on
// the server (other benches, other developers), these counts are this process's alone.
//
// As a preload of the Requester under test, written to $TMPDIR/round-trips/<pid>.json when it exits:
//   node bench/load.ts --mode kafka --count 10000 --env "NODE_OPTIONS=--import=$PWD/bench/round-trips.ts"
// Then, per task:
//   node bench/round-trips.ts /tmp/round-trips/<pid>.json --tasks 10000
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

type Counts = Map<string, number>;
type Fn = (this: unknown, ...args: unknown[]) => unknown;
type Patchable = Record<string, unknown>;

const add = (counts: Counts, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);

/** Replaces `proto[name]` by a function that calls `before` with the call's this and arguments. */
function around(proto: Patchable, name: string, before: (self: unknown, args: unknown[]) => void): void {
  const original = proto[name] as Fn;
  proto[name] = function (this: unknown, ...args: unknown[]) {
    before(this, args);
    return original.apply(this, args);
  };
}

function count(): void {
  const require = createRequire(path.resolve(import.meta.dirname, '../packages/shared/package.json'));
  const redis = (require('ioredis') as { default: { prototype: Patchable } }).default.prototype;
  const connection = (require('kafkajs/src/network/connection.js') as { prototype: Patchable }).prototype;
  const commands: Counts = new Map();
  const kafka: Counts = new Map();
  const writes: Counts = new Map();
  // A script is sent as EVALSHA <sha>: named back from the definitions (ioredis's defineCommand).
  const scripts = new Map<string, string>();
  around(redis, 'defineCommand', (_, [name, definition]) => {
    const { lua } = definition as { lua: string };
    scripts.set(createHash('sha1').update(lua).digest('hex'), name as string);
  });
  around(redis, 'sendCommand', (_, [command]) => {
    const { name, args } = command as { name: string; args: unknown[] };
    add(commands, name === 'evalsha' ? `evalsha ${scripts.get(String(args[0])) ?? '?'}` : name);
  });
  around(connection, 'send', (self, [request]) => {
    const { apiName } = (request as { request: { apiName: string } }).request;
    add(kafka, `${apiName} (broker ${(self as { port: number }).port})`);
  });
  around(net.Socket.prototype as unknown as Patchable, '_writeGeneric', (self) => {
    add(writes, String((self as net.Socket).remotePort));
  });
  process.on('exit', () => {
    const counts = {
      argv: process.argv.slice(1),
      redis: Object.fromEntries(commands),
      kafka: Object.fromEntries(kafka),
      socketWrites: Object.fromEntries(writes),
    };
    const dir = path.join(tmpdir(), 'round-trips');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `${process.pid}.json`), JSON.stringify(counts));
  });
}

function report(file: string, tasks: number): void {
  const counts = JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, number>>;
  for (const what of ['redis', 'kafka', 'socketWrites']) {
    const rows = Object.entries(counts[what] ?? {}).sort(([, a], [, b]) => b - a);
    const total = rows.reduce((sum, [, n]) => sum + n, 0);
    console.log(`${what}: ${(total / tasks).toFixed(2)} per task`);
    for (const [key, n] of rows.filter(([, n]) => n / tasks >= 0.005))
      console.log(`  ${(n / tasks).toFixed(3).padStart(7)}  ${key}`);
  }
}

if (import.meta.main) {
  // Imported here only: the preload must not load the test harness into the Requester.
  const { parseBenchArgs } = await import('./harness.ts');
  const { values, positionals, fail } = parseBenchArgs({
    usage: `Counts a process's Redis commands, Kafka requests and socket writes, in the process itself.
As a preload of the Requester under test (written to $TMPDIR/round-trips/<pid>.json when it exits):

  node bench/load.ts --mode kafka --count 10000 --env "NODE_OPTIONS=--import=$PWD/bench/round-trips.ts"

then, per task:

  node bench/round-trips.ts <pid>.json --tasks N

As run for docs/benchmarks/executor.md:
  node bench/round-trips.ts /tmp/round-trips/<pid>.json --tasks 5000`,
    positionals: '<pid>.json',
    options: {
      tasks: {
        type: 'string',
        default: '1',
        value: 'N',
        number: true,
        help: 'tasks the counts are divided by',
      },
    },
  });
  report(
    positionals[0] ?? fail('a counts file is required: node bench/round-trips.ts <pid>.json'),
    Number(values.tasks),
  );
} else {
  count();
}
