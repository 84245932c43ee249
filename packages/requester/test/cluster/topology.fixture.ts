import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTarget, type Target, uniqueName } from '@requester/shared/testing';
import { startTopology, type Topology, type TopologyOptions } from '../../scripts/cluster/topology.ts';
import { dropStackDatabase, ResultCollector } from '../e2e/stack.fixture.ts';

/** A topology of the cluster tests with what they need beside it: a target and a reader of `out`. */
export interface TestTopology {
  topology: Topology;
  target: Target;
  results: ResultCollector;
  /** Stops all of it and drops the topology's database and run folder. */
  stop(): Promise<void>;
}

/** Starts a target and a topology named `<tag>-…` in a run folder of its own, and reads its `out`. */
export async function startTestTopology(
  tag: string,
  options: Omit<TopologyOptions, 'name' | 'runDir'>,
): Promise<TestTopology> {
  const runDir = mkdtempSync(path.join(tmpdir(), `rq-${tag}-test-`));
  const target = await startTarget();
  const topology = await startTopology({ name: uniqueName(tag), runDir, ...options });
  const results = new ResultCollector(topology.config.topicOut);
  await results.start();
  return {
    topology,
    target,
    results,
    async stop() {
      await results.stop();
      await topology.stop();
      await target.close();
      await dropStackDatabase(topology);
      rmSync(runDir, { recursive: true, force: true });
    },
  };
}
