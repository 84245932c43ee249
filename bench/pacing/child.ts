// One executor process of a run (`--executor-child`): ready, then started with the others at the same instant.
import { once } from 'node:events';
import { type CapacitySpec, capacityPart } from './capacity.ts';
import { type QuotaSpec, quotaPart } from './quota.ts';
import { redis } from './support.ts';

export async function runExecutorChild(json: string): Promise<never> {
  const spec = JSON.parse(json) as (Omit<CapacitySpec, 'startMs'> & { kind: 'capacity' }) | QuotaSpec;
  const go = once(process, 'message');
  process.send?.({ ready: true });
  const [{ startMs }] = (await go) as [{ startMs: number }];
  const part =
    spec.kind === 'quota' ? await quotaPart(spec, 1, startMs) : await capacityPart({ ...spec, startMs });
  process.send?.(part, () => {
    redis.disconnect();
    process.exit(0);
  });
  // The process ends once the part is sent.
  return new Promise(() => {});
}
