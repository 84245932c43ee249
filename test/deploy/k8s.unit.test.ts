import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROLE_NAMES } from '../../packages/shared/src/role/index.ts';
import { type Manifest, render, ruleProblems, schemaProblems } from './k8s.ts';

const OVERLAYS = join(import.meta.dirname, '../../infra/k8s/overlays');

describe.each(readdirSync(OVERLAYS))('infra/k8s overlay %s', (overlay) => {
  const objects = render(join(OVERLAYS, overlay));

  it('renders every role, each object valid against its schema', () => {
    const kinds = new Set(objects.map((object) => object.kind));
    for (const kind of [
      'Deployment',
      'PodDisruptionBudget',
      'HorizontalPodAutoscaler',
      'ScaledObject',
      'Service',
    ])
      expect(kinds).toContain(kind);
    const roles = objects
      .filter((object) => object.kind === 'Deployment')
      .flatMap((deployment) => deployment.spec.template.spec.containers[0].args[1].split(','));
    expect(new Set(roles)).toEqual(new Set(ROLE_NAMES));
    expect(objects.flatMap(schemaProblems)).toEqual([]);
  });

  it('keeps the rules: probes, resources, non-root read-only pods, a PDB and one autoscaler per role', () => {
    expect(ruleProblems(objects, ROLE_NAMES)).toEqual([]);
  });
});

describe('the manifest checks', () => {
  const objects = render(join(OVERLAYS, 'dev'));
  const copy = (): Manifest[] => structuredClone(objects);
  const deployment = (set: Manifest[], role: string) =>
    set.find((object) => object.metadata.name === `requester-${role}`)!;

  it('catch a Deployment without probes, resources or a read-only root', () => {
    const broken = copy();
    const container = deployment(broken, 'relay').spec.template.spec.containers[0];
    delete container.readinessProbe;
    delete container.resources;
    container.securityContext.readOnlyRootFilesystem = false;
    expect(ruleProblems(broken, ROLE_NAMES)).toEqual([
      'Deployment requester-relay: readiness probe is not /readyz',
      'Deployment requester-relay: cpu/memory requests or memory limit missing',
      'Deployment requester-relay: root filesystem is writable',
    ]);
  });

  it('catch a role without an autoscaler, a short grace period and routers beyond the partitions', () => {
    const broken = copy().filter(
      (object) => object.metadata.name !== 'requester-relay' || object.kind !== 'HorizontalPodAutoscaler',
    );
    deployment(broken, 'ingress').spec.template.spec.terminationGracePeriodSeconds = 10;
    broken.find(
      (object) => object.kind === 'HorizontalPodAutoscaler' && object.metadata.name === 'requester-router',
    )!.spec.maxReplicas = 40;
    expect(ruleProblems(broken, ROLE_NAMES).sort()).toEqual([
      'Deployment requester-ingress: terminationGracePeriodSeconds must exceed SHUTDOWN_TIMEOUT (30s)',
      'Deployment requester-relay: 0 HPAs and 0 ScaledObjects scale it (want exactly one autoscaler)',
      'Deployment requester-router: routers may scale to 40, beyond the 12 partitions of in',
    ]);
  });

  it('catch an object that breaks its schema', () => {
    const broken = copy();
    deployment(broken, 'executor').spec.replicas = 'two';
    expect(schemaProblems(deployment(broken, 'executor'))).toHaveLength(1);
  });
});
