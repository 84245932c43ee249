import { redisServerAvailable, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterProcess, Topology } from '../../scripts/cluster/topology.ts';
import type { ResultCollector } from '../e2e/stack.fixture.ts';
import { startTestTopology, type TestTopology } from './topology.fixture.ts';

/**
 * The scale-out topology of `./dev cluster` — 2 gateways (ingress + sync-gateway) behind a
 * round-robin front, 2 routers, 3 executors, 2 relays as processes of their own, a 3-master Redis
 * Cluster, `in` with 12 partitions — with its own topics, Redis and database. The tests run in
 * order on one topology; the last one kills a process of each role.
 */
let topology: Topology;
let target: Target;
let results: ResultCollector;
let started: TestTopology | undefined;

beforeAll(async () => {
  started = await startTestTopology('cl', {
    redisFromPort: 7501,
    env: {
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      AUTH: 'off',
      // A killed executor's leases and a killed router's partitions come back within seconds.
      EXECUTOR_LEASE_TTL: '5s',
      KAFKA_SESSION_TIMEOUT: '6s',
      QUEUE_SHARDS: '16',
      SHUTDOWN_TIMEOUT: '10s',
      // Few workers per executor, so the 40 ordered partitions' heads cannot all sit in one of them.
      MAX_WORKERS: '8',
    },
  });
  ({ topology, target, results } = started);
}, 180_000);

afterAll(async () => {
  await started?.stop();
}, 60_000);

const post = (baseUrl: string, envelope: unknown) =>
  fetch(`${baseUrl}/request`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(envelope),
    signal: AbortSignal.timeout(30_000),
  });

/**
 * What a caller does when its gateway dies under it: try again (the front sends the new connection
 * to a live gateway), with the same requestId. Resolves once a gateway accepted the request.
 */
async function submit(baseUrl: string, envelope: unknown): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const status = await post(baseUrl, envelope).then(
      async (res) => {
        await res.arrayBuffer();
        return res.status;
      },
      () => 0,
    );
    if ((status > 0 && status < 500) || attempt >= 20) return status;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The sum of a Prometheus counter over its labels, read from a process's /metrics. */
async function metric(process: ClusterProcess, name: string): Promise<number> {
  const text = await (await fetch(`${process.adminUrl}/metrics`)).text();
  const line = new RegExp(`^\\w*${name}(\\{[^}]*\\})? (\\S+)$`, 'gm');
  return [...text.matchAll(line)].reduce((sum, m) => sum + Number(m[2]), 0);
}

describe.skipIf(!redisServerAvailable())('the local scale-out topology', () => {
  it('keeps every ordered partition in order across gateways, routers and executors', async () => {
    const keys = 40;
    const perKey = 5;
    // Each key's records are posted one after the other, alternately to the two gateways.
    await Promise.all(
      Array.from({ length: keys }, async (_, k) => {
        for (let seq = 0; seq < perKey; seq++) {
          const gateway = topology.gatewayUrls[seq % topology.gatewayUrls.length] as string;
          const status = await submit(gateway, {
            request: { uri: `${target.url}/random-delay/20?key=k${k}&seq=${seq}` },
            meta: { requestId: `ord-${k}-${seq}`, partition: `!ord-${k}` },
          });
          expect(status).toBe(202);
        }
      }),
    );
    const ids = Array.from(
      { length: keys * perKey },
      (_, i) => `ord-${Math.floor(i / perKey)}-${i % perKey}`,
    );
    await results.until(() => ids.every((id) => results.byId.has(id)), 120_000, 'every ordered result');

    const arrivals = new Map<string, number[]>();
    for (const call of target.calls) {
      const url = new URL(call.path, 'http://target');
      const key = url.searchParams.get('key');
      if (!key || !url.pathname.startsWith('/random-delay')) continue;
      arrivals.set(key, [...(arrivals.get(key) ?? []), Number(url.searchParams.get('seq'))]);
    }
    for (let k = 0; k < keys; k++) expect(arrivals.get(`k${k}`), `key k${k}`).toEqual([0, 1, 2, 3, 4]);
    for (const id of ids) expect(results.byId.get(id)?.[0]?.response.status, id).toBe(200);
    // The work was spread: every router routed and every executor leased some of it.
    for (const router of topology.byRole('router'))
      expect(await metric(router, 'router_records_total')).toBeGreaterThan(0);
    for (const executor of topology.byRole('executor')) {
      expect(await metric(executor, 'queue_leased_total'), executor.name).toBeGreaterThan(0);
    }
  }, 180_000);

  it('answers a sync call at whichever gateway received it; a long-poll works at the other one too', async () => {
    const gateways = topology.gatewayUrls;
    for (let i = 0; i < 20; i++) {
      const gateway = gateways[i % gateways.length] as string;
      const res = await post(gateway, {
        request: { uri: `${target.url}/echo`, method: 'POST', body: `sync-${i}` },
        meta: { requestId: `sync-${i}`, sync: true },
      });
      expect(res.status, `sync-${i} at ${gateway}`).toBe(200);
      const result = (await res.json()) as { response: { body: string }; meta: { requestId: string } };
      expect(result.meta.requestId).toBe(`sync-${i}`);
      expect(result.response.body).toBe(`sync-${i}`);

      // Every gateway reads every result of out, so the other one knows it too (see docs/benchmarks/scale-out.md,
      // "Sync-gateway fan-in", for what that costs as gateways are added).
      const other = gateways[(i + 1) % gateways.length] as string;
      const poll = await fetch(`${other}/requests/sync-${i}?wait=10s`, {
        signal: AbortSignal.timeout(30_000),
      });
      expect(poll.status).toBe(200);
      expect(((await poll.json()) as { meta: { requestId: string } }).meta.requestId).toBe(`sync-${i}`);
    }
    // And through the front, which alternates connections between the gateways.
    const viaFront = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post(topology.frontUrl, {
          request: { uri: '', body: `f-${i}` },
          meta: { requestId: `front-${i}`, sync: true },
        }),
      ),
    );
    for (const res of viaFront) expect(res.status).toBe(200);
  }, 120_000);

  it('loses nothing when one process of each role is killed (kill -9) under load; the survivors take over', async () => {
    const total = 300;
    const scheduledEvery = 5; // every 5th request waits 3 s in the outbox: the relays carry it
    const envelope = (i: number) => ({
      request: { uri: `${target.url}/slow/100?n=${i}` },
      meta: {
        requestId: `load-${i}`,
        ...(i % 7 === 0 && i % scheduledEvery !== 0 ? { partition: `!load-${i % 21}` } : {}),
        ...(i % scheduledEvery === 0 ? { scheduled: new Date(Date.now() + 3_000).toISOString() } : {}),
      },
    });
    const send = (from: number, to: number) =>
      Promise.all(
        Array.from({ length: to - from }, async (_, j) => {
          const status = await submit(topology.frontUrl, envelope(from + j));
          expect(status, `load-${from + j}`).toBe(202);
        }),
      );
    const ids = Array.from({ length: total }, (_, i) => `load-${i}`);
    const answered = () => ids.filter((id) => results.byId.has(id)).length;

    await send(0, total / 2);
    await results.until(() => answered() >= 30, 60_000, 'the first 30 load results');
    const victims = (['gateway', 'router', 'executor', 'relay'] as const).map(
      (role) => topology.byRole(role)[0] as ClusterProcess,
    );
    const atKill = answered();
    await Promise.all(victims.map((victim) => topology.kill(victim)));
    await send(total / 2, total);

    await results.until(() => answered() === total, 150_000, `all ${total} load results`);
    expect(atKill).toBeLessThan(total);
    const failed = ids.filter((id) => results.byId.get(id)?.[0]?.response.status !== 200);
    expect(failed.map((id) => results.byId.get(id))).toEqual([]);
  }, 240_000);
});
