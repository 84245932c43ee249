/**
 * Whether the relay's turn across processes survives PostgreSQL killed (kill -9) and restarted
 * again and again while rows fall due: a Relay on a private PostgreSQL, rows due within a few
 * seconds added all along, and after each restart a marker row due at once that must leave the
 * outbox (produced to Kafka and deleted). A round whose marker stays past `--stall` seconds is a
 * stall: the relay's workers wait behind a turn that never comes back.
 *
 *   node packages/relay/bench/turn-crash-probe.ts [--rounds 20] [--workers 2] [--stall 60]
 *
 * Exits 1 when any round stalled; prints each round's recovery time (restart to marker gone) and
 * how often a statement of the turn's session ran into its deadline (its session replaced).
 * `--deadline 2000000000` (about 23 days) stands for the turn before its statements were bounded.
 */
import { Relay } from '../../relay/src/relay/index.ts';
import {
  createPg,
  DEFAULT_TURN_DEADLINE_MS,
  ensureDatabase,
  migrate,
  Outbox,
  type OutboxRow,
} from '../../shared/src/index.ts';
import {
  capturingLogger,
  createTestTopics,
  deleteLeftovers,
  parseBenchArgs,
  startPrivatePostgres,
  testKafka,
  uniqueName,
} from '../../shared/src/testing/index.ts';

const { values: args } = parseBenchArgs({
  usage: `Kills (kill -9) and restarts a private PostgreSQL under a running Relay, round after round,
and checks after each restart that a row due at once still leaves the outbox.

  node packages/relay/bench/turn-crash-probe.ts [--rounds 20] [--workers 2] [--stall 60] [--deadline 10000]

--deadline 2000000000 (about 23 days) stands for the turn before its statements were bounded.`,
  options: {
    rounds: { type: 'string', default: '20', value: 'N', number: true, help: 'kill-restart rounds' },
    workers: { type: 'string', default: '2', value: 'N', number: true, help: 'RELAY_WORKERS' },
    stall: {
      type: 'string',
      default: '60',
      value: 'S',
      number: true,
      help: 'seconds a marker may wait after a restart before the round counts as a stall',
    },
    deadline: {
      type: 'string',
      default: String(DEFAULT_TURN_DEADLINE_MS),
      value: 'MS',
      number: true,
      help: "the client's bound on each statement of the turn's session (turnDeadlineMs)",
    },
  },
});
const ROUNDS = Number(args.rounds);
const STALL_MS = Number(args.stall) * 1000;

const server = await startPrivatePostgres();
const url = `${server.url}/probe`;
await ensureDatabase(url);
const sql = createPg({ url, max: 10 });
await migrate(sql);
const topic = uniqueName('relay.turn-probe');
await createTestTopics([topic], 3);
const producer = testKafka().producer();
await producer.connect();
const outbox = new Outbox(sql, { turnDeadlineMs: Number(args.deadline) });
// The relay's failures, to count the turn statements that ran into their deadline.
const { logger, lines } = capturingLogger('debug');
const deadlines = () =>
  lines.filter((line) => /did not settle within/.test(String((line.err as { message?: string })?.message)))
    .length;
const relay = new Relay({
  outbox,
  producer,
  logger,
  workers: Number(args.workers),
  batch: 20,
  produceTimeoutMs: 5_000,
});
await relay.start();

const row = (id: string, dueInMs: number): OutboxRow => ({
  taskId: `${id}:0`,
  requestId: id,
  dueAt: new Date(Date.now() + dueInMs),
  topic,
  key: `!p${id.length % 7}`,
  payload: Buffer.from(JSON.stringify({ meta: { requestId: id } })),
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Rows due within 3 s all along: the relay keeps claiming, so kills meet it at every step.
let feeding = true;
let added = 0;
const feeder = (async () => {
  while (feeding) {
    const rows = Array.from({ length: 5 }, () => row(uniqueName('r'), Math.random() * 3_000));
    await outbox.add(rows).then(
      () => (added += rows.length),
      () => {},
    );
    await sleep(200);
  }
})();

/** Adds a row due now and waits until it left the outbox; the time it took, or undefined (a stall). */
async function markerGone(): Promise<number | undefined> {
  const startedAt = Date.now();
  const id = uniqueName('marker');
  while (Date.now() - startedAt < STALL_MS) {
    if (
      await outbox.add([row(id, 0)]).then(
        () => true,
        () => false,
      )
    )
      break;
    await sleep(200);
  }
  while (Date.now() - startedAt < STALL_MS) {
    const [left] = await sql`select count(*)::int as n from outbox where request_id = ${id}`.catch(() => [
      { n: 1 },
    ]);
    if (left?.n === 0) return Date.now() - startedAt;
    await sleep(200);
  }
  return undefined;
}

const recoveries: Array<number | undefined> = [];
for (let round = 1; round <= ROUNDS; round++) {
  await sleep(500 + Math.random() * 3_000);
  const before = deadlines();
  await server.kill();
  await sleep(Math.random() * 500);
  await server.restart();
  const took = await markerGone();
  recoveries.push(took);
  // Deadlines since just before the kill: a statement stranded by it ran into its deadline.
  const replaced = deadlines() - before;
  console.log(
    `round ${round}: ${took === undefined ? `STALL (> ${STALL_MS} ms)` : `marker gone in ${took} ms`}${replaced ? `, turn session replaced at its deadline ${replaced}×` : ''}`,
  );
  if (took === undefined) break;
}
feeding = false;
await feeder;
const stalls = recoveries.filter((t) => t === undefined).length;
const times = recoveries.filter((t): t is number => t !== undefined).sort((a, b) => a - b);
console.log(
  `${recoveries.length} rounds, ${stalls} stalls, ${deadlines()} turn deadlines, ${added} rows added; recovery median ${times[Math.floor(times.length / 2)] ?? '-'} ms, max ${times.at(-1) ?? '-'} ms`,
);
await Promise.race([relay.stop(), sleep(10_000)]);
await producer.disconnect();
await sql.end({ timeout: 1 });
await server.stop();
// Its topics: the broker keeps what a bench makes until someone deletes it.
await deleteLeftovers();
process.exit(stalls > 0 ? 1 : 0);
