// Soak: a steady load for a long time, and whether memory stays flat. A whole Requester
// (`requester --role all`, a child process on its own topics, Redis prefix and database) gets a
// constant rate of direct-Kafka requests to one local target; every --interval seconds each side's
// RSS, heap and external memory are sampled; at the end a PNG plots them over time.
//
//   node bench/soak.ts [--duration 600 (s)] [--rate 500 (requests/s)] [--body 100]
//        [--interval 10 (s)] [--png .run/soak.png] [--baseline <checkout>] [--env K=V,...]
//        [--roles all]
//
// With --baseline <checkout> (e.g. a git worktree of main with its node_modules installed), a
// second Requester from that checkout gets the same load at the same time, and both are plotted.
// A real soak is ten minutes or more (the default); a short run only proves the script works.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Resvg } from '@resvg/resvg-js';
import { stackEnv } from '../packages/requester/test/e2e/stack.fixture.ts';
import {
  createKafka,
  createLogger,
  type KafkaClient,
  type KafkaConsumer,
} from '../packages/shared/src/index.ts';
import { eventually, freePort } from '../packages/shared/src/testing/index.ts';
import { formatMemory, type MemorySample, memoryOf } from './memory.ts';

const { values: args } = parseArgs({
  args: process.argv.slice(2).filter((arg, i) => !(i === 0 && arg === '--')),
  options: {
    duration: { type: 'string', default: '600' },
    rate: { type: 'string', default: '500' },
    body: { type: 'string', default: '100' },
    interval: { type: 'string', default: '10' },
    png: { type: 'string', default: '.run/soak.png' },
    baseline: { type: 'string' },
    env: { type: 'string', default: '' },
    roles: { type: 'string', default: 'all' },
    brokers: { type: 'string', default: '127.0.0.1:9092' },
  },
});
const durationMs = Number(args.duration) * 1000;
const rate = Number(args.rate);
const intervalMs = Number(args.interval) * 1000;
const extraEnv = Object.fromEntries(
  (args.env ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const here = path.resolve(import.meta.dirname, '..');
const kafka: KafkaClient = createKafka({
  brokers: args.brokers,
  clientId: 'bench-soak',
  logger: createLogger({ level: 'silent' }),
});
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
});
process.on('SIGINT', () => process.exit(130));

interface Side {
  label: string;
  pid: number;
  adminUrl: string;
  topicIn: string;
  sent: number;
  completed: number;
  samples: Array<{ atS: number } & MemorySample>;
  reader: KafkaConsumer;
}

async function startSide(label: string, root: string): Promise<Side> {
  const stack = await stackEnv({ KAFKA_BROKERS: args.brokers, LOG_LEVEL: 'warn', ...extraEnv });
  const child = spawn(path.join(root, 'packages/requester/bin/requester'), ['--role', args.roles ?? 'all'], {
    env: { ...process.env, ...stack.env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  await eventually(
    () =>
      fetch(`${stack.adminUrl}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      ),
    90_000,
    `requester ${label} ready`,
  );
  const reader = kafka.consumer({
    groupId: `${stack.env.KAFKA_TOPIC_OUT}-soak-${randomBytes(3).toString('hex')}`,
    maxWaitMs: 100,
  });
  const side: Side = {
    label,
    pid: child.pid as number,
    adminUrl: stack.adminUrl,
    topicIn: stack.env.KAFKA_TOPIC_IN as string,
    sent: 0,
    completed: 0,
    samples: [],
    reader,
  };
  await reader.start({
    topics: [stack.env.KAFKA_TOPIC_OUT as string],
    fromBeginning: true,
    commit: 'never',
    onBatch: async ({ records }) => {
      side.completed += records.length;
    },
  });
  return side;
}

/** The project's test target in a child process (one local origin, as bench/load.ts uses). */
async function startTarget(): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(here, 'k6/target/serve.ts'), String(port)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    () =>
      fetch(`${url}/echo`).then(
        (r) => r.ok,
        () => false,
      ),
    90_000,
    'target ready',
  );
  return url;
}

/** Sends `rate` requests a second to every side, in ten slices a second, until `until`. */
async function steadyLoad(sides: Side[], targetUrl: string, until: number): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  const body = 'x'.repeat(Number(args.body));
  const start = Date.now();
  let tick = 0;
  while (Date.now() < until) {
    tick++;
    // How many should be out by now, so that a slow send catches up instead of drifting.
    const due = Math.floor(((Date.now() - start) / 1000) * rate);
    await Promise.all(
      sides.map(async (side) => {
        const n = due - side.sent;
        if (n <= 0) return;
        const createdAt = new Date().toISOString();
        const records = Array.from({ length: n }, (_, i) => {
          const requestId = `soak-${side.label}-${side.sent + i}`;
          const request = { uri: `${targetUrl}/echo`, method: 'POST', body };
          return { key: requestId, value: JSON.stringify({ request, meta: { requestId }, createdAt }) };
        });
        side.sent += n;
        await producer.send(side.topicIn, records, 30_000);
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + tick * 100 - Date.now())));
  }
  await producer.disconnect();
}

async function sample(sides: Side[], start: number): Promise<void> {
  const atS = Math.round((Date.now() - start) / 1000);
  for (const side of sides) {
    const m = await memoryOf(side.pid, side.adminUrl);
    side.samples.push({ atS, ...m });
    console.log(
      `${String(atS).padStart(5)} s ${side.label.padEnd(9)} ${formatMemory(m)}; sent ${side.sent}, ` +
        `completed ${side.completed}; load average ${loadavg()}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// The plot: an SVG drawn here, rendered to PNG by resvg (no browser, no system tool).

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

function plotSvg(sides: Side[], title: string): string {
  const [w, h] = [960, 540];
  const m = { left: 70, right: 200, top: 50, bottom: 50 };
  const all = sides.flatMap((s) => s.samples);
  const maxT = Math.max(1, ...all.map((p) => p.atS));
  const maxY = Math.ceil(Math.max(100, ...all.map((p) => p.rss)) / 100) * 100;
  const x = (t: number) => m.left + (t / maxT) * (w - m.left - m.right);
  const y = (mb: number) => h - m.bottom - (mb / maxY) * (h - m.top - m.bottom);
  const parts: string[] = [
    `<rect width="${w}" height="${h}" fill="white"/>`,
    `<text x="${m.left}" y="28" font-size="16">${escapeXml(title)}</text>`,
  ];
  for (let mb = 0; mb <= maxY; mb += maxY / 5) {
    parts.push(
      `<line x1="${m.left}" x2="${w - m.right}" y1="${y(mb)}" y2="${y(mb)}" stroke="#ddd"/>`,
      `<text x="${m.left - 8}" y="${y(mb) + 4}" font-size="12" text-anchor="end">${mb} MB</text>`,
    );
  }
  for (let i = 0; i <= 5; i++) {
    const t = (maxT * i) / 5;
    parts.push(
      `<text x="${x(t)}" y="${h - m.bottom + 20}" font-size="12" text-anchor="middle">${Math.round(t)} s</text>`,
    );
  }
  let legend = 0;
  sides.forEach((side, i) => {
    const color = COLORS[i % COLORS.length] as string;
    const series: Array<[string, (p: MemorySample) => number, string]> = [
      ['RSS', (p) => p.rss, ''],
      ['heap used', (p) => p.heapUsed, 'stroke-dasharray="6 4"'],
    ];
    for (const [name, value, dash] of series) {
      const points = side.samples.map((p) => `${x(p.atS).toFixed(1)},${y(value(p)).toFixed(1)}`).join(' ');
      parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" ${dash} points="${points}"/>`);
      const ly = m.top + 20 * legend++;
      parts.push(
        `<line x1="${w - m.right + 15}" x2="${w - m.right + 45}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2" ${dash}/>`,
        `<text x="${w - m.right + 52}" y="${ly + 4}" font-size="12">${escapeXml(`${side.label} ${name}`)}</text>`,
      );
    }
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="DejaVu Sans, sans-serif">${parts.join('')}</svg>`;
}

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

async function main(): Promise<void> {
  console.log(
    `soak: ${rate} requests/s for ${durationMs / 1000} s, ${args.body} B bodies, RSS every ${intervalMs / 1000} s; ` +
      `load average ${loadavg()}`,
  );
  if (Object.keys(extraEnv).length) console.log(`extra env: ${JSON.stringify(extraEnv)}`);
  const targetUrl = await startTarget();
  const sides = [await startSide('new', here)];
  if (args.baseline) sides.push(await startSide('baseline', path.resolve(args.baseline)));
  const start = Date.now();
  await sample(sides, start);
  const sampler = setInterval(() => void sample(sides, start), intervalMs);
  await steadyLoad(sides, targetUrl, start + durationMs);
  clearInterval(sampler);
  await sample(sides, start);
  for (const side of sides) await side.reader.stop();
  const title = `requester --role all, ${rate} req/s direct Kafka, ${args.body} B bodies (load average ${loadavg()})`;
  const png = new Resvg(plotSvg(sides, title), {
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' },
  })
    .render()
    .asPng();
  const out = path.resolve(here, args.png ?? '.run/soak.png');
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, png);
  for (const side of sides) {
    const rss = side.samples.map((p) => p.rss);
    const half = rss.slice(Math.floor(rss.length / 2));
    console.log(
      `${side.label}: RSS first ${rss[0]?.toFixed(0)} MB, max ${Math.max(...rss).toFixed(0)} MB, last ` +
        `${rss.at(-1)?.toFixed(0)} MB; second half min ${Math.min(...half).toFixed(0)} max ${Math.max(...half).toFixed(0)} MB; ` +
        `sent ${side.sent}, completed ${side.completed}`,
    );
  }
  console.log(`plot: ${out}`);
}

await main();
process.exit(0);
