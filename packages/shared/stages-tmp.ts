import { Kafka, logLevel } from 'kafkajs';
const kafka = new Kafka({ brokers: ['127.0.0.1:9092'], logLevel: logLevel.NOTHING });
const admin = kafka.admin(); await admin.connect();
const topics = (await admin.listTopics()).filter((t) => t.endsWith('.events') && t.startsWith('e2e-'));
const sizes = await Promise.all(topics.sort().slice(-6).map(async (t) => [t, (await admin.fetchTopicOffsets(t)).reduce((s, p) => s + Number(p.high), 0)] as const));
const [topic, total] = process.argv[2] ? [process.argv[2], 0] : sizes.sort((a, b) => b[1] - a[1])[0]!;
await admin.disconnect();
const consumer = kafka.consumer({ groupId: `stages-${Date.now()}` });
await consumer.connect(); await consumer.subscribe({ topic, fromBeginning: true });
const byReq = new Map<string, Record<string, number>>();
let seen = 0;
await new Promise<void>((resolve) => {
  void consumer.run({ eachMessage: async ({ message }) => {
    seen++;
    const events = [JSON.parse(message.value!.toString())].flat();
    for (const e of events) { const r = byReq.get(e.requestId) ?? {}; if (e.type === 'attempt') { r.attemptEnd = e.at; r.attemptStart = e.at - e.durationMs; } else r[e.type] ??= e.at; byReq.set(e.requestId, r); }
    if (seen >= total) resolve();
  } });
});
await consumer.disconnect();
const pairs = [['accepted','routed'],['routed','leased'],['leased','attemptStart'],['attemptStart','attemptEnd'],['attemptEnd','completed'],['accepted','completed']];
const med = (a: number[]) => { a.sort((x, y) => x - y); return a[Math.floor(a.length / 2)]; };
const p90 = (a: number[]) => a[Math.floor(a.length * 0.9)];
console.log(topic, byReq.size, 'requests');
for (const [a, b] of pairs) { const d = [...byReq.values()].filter((r) => r[a] !== undefined && r[b] !== undefined).map((r) => r[b]! - r[a]!); console.log(`${a} → ${b}: p50 ${med(d)?.toFixed(1)} ms, p90 ${p90(d)?.toFixed(1)} (n=${d.length})`); }
