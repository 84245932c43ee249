import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROLE_NAMES } from '../../packages/shared/src/role/index.ts';
import { isRole, type Manifest, render, ruleProblems, schemaProblems } from './k8s.ts';

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
      'Namespace',
      'PodMonitor',
      'PrometheusRule',
      'NetworkPolicy',
    ])
      expect(kinds).toContain(kind);
    const roles = objects
      .filter(isRole)
      .flatMap((deployment) => deployment.spec.template.spec.containers[0].args[1].split(','));
    expect(new Set(roles)).toEqual(new Set(ROLE_NAMES));
    expect(objects.flatMap(schemaProblems)).toEqual([]);
  });

  it('carries the alert rules of infra/prometheus/alerts.yml as a PrometheusRule', () => {
    const alerts = parse(readFileSync(join(OVERLAYS, '../../prometheus/alerts.yml'), 'utf8'));
    const rules = objects.filter((object) => object.kind === 'PrometheusRule');
    expect(rules.map((rule) => rule.spec.groups)).toEqual([alerts.groups]);
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
      (object) => object.kind === 'ScaledObject' && object.metadata.name === 'requester-router',
    )!.spec.maxReplicaCount = 40;
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

  it('catch what makes an apply fail or drift: no namespace, a plain ConfigMap, no migrations, an open admin port', () => {
    const broken = copy().filter((object) => object.kind !== 'Namespace' && object.kind !== 'PodMonitor');
    // A plain ConfigMap, as the base had before: the name without its hash, everywhere.
    const config = broken.find((object) => object.kind === 'ConfigMap')!;
    for (const object of broken.filter(isRole))
      for (const container of [
        ...object.spec.template.spec.containers,
        ...object.spec.template.spec.initContainers,
      ])
        for (const source of container.envFrom)
          if (source.configMapRef?.name === config.metadata.name)
            source.configMapRef.name = 'requester-config';
    config.metadata.name = 'requester-config';
    delete deployment(broken, 'relay').spec.template.spec.initContainers;
    broken
      .find((object) => object.kind === 'NetworkPolicy')!
      .spec.ingress.push({ ports: [{ port: 'admin' }] });
    expect(ruleProblems(broken, ROLE_NAMES).sort()).toEqual([
      '0 PodMonitors scrape the admin port (want 1)',
      'ConfigMap requester-config: no hash suffix (a changed setting would restart nothing)',
      'Deployment requester-relay: no `migrate` init container: migrations would not run before the rollout',
      'Namespace requester-dev: used by the overlay but not created by it',
      'NetworkPolicy requester: opens the admin port to every source',
    ]);
  });

  it('catch autoscalers on the wrong signal: another namespace, an empty answer as 0, routers on CPU', () => {
    const broken = copy();
    const executor = broken.find(
      (o) => o.kind === 'ScaledObject' && o.metadata.name === 'requester-executor',
    )!;
    executor.spec.triggers[0].metadata.query = 'max(requester_queue_depth{state="pending"})';
    delete executor.spec.triggers[0].metadata.ignoreNullValues;
    const router = broken.find((o) => o.kind === 'ScaledObject' && o.metadata.name === 'requester-router')!;
    router.spec.triggers[0].metadata.bootstrapServers = 'elsewhere:9092';
    router.spec.triggers = router.spec.triggers.filter((t: { type: string }) => t.type !== 'kafka');
    expect(ruleProblems(broken, ROLE_NAMES).sort()).toEqual([
      'Deployment requester-router: routers must scale on the lag of in (a KEDA kafka trigger), not on CPU',
      'ScaledObject requester-executor: an empty Prometheus answer must fail the poll (ignoreNullValues "false") with a fallback',
      'ScaledObject requester-executor: every selector of the query must filter on namespace="requester-dev"',
    ]);
    const lagElsewhere = copy();
    lagElsewhere.find(
      (o) => o.kind === 'ScaledObject' && o.metadata.name === 'requester-router',
    )!.spec.triggers[0].metadata.bootstrapServers = 'elsewhere.kafka.svc:9092';
    expect(ruleProblems(lagElsewhere, ROLE_NAMES)).toEqual([
      'ScaledObject requester-router: bootstrapServers elsewhere.kafka.svc:9092 is not KAFKA_BROKERS kafka.requester-dev.svc:9092',
    ]);
    // The brokers by a name only this namespace resolves: KEDA, in its own, would read nothing.
    const local = copy();
    local.find((o) => o.kind === 'ConfigMap')!.data.KAFKA_BROKERS = 'kafka:9092';
    local.find(
      (o) => o.kind === 'ScaledObject' && o.metadata.name === 'requester-router',
    )!.spec.triggers[0].metadata.bootstrapServers = 'kafka:9092';
    expect(ruleProblems(local, ROLE_NAMES)).toEqual([
      "ScaledObject requester-router: bootstrapServers kafka: not resolvable from KEDA's namespace (qualify it: <service>.<namespace>.svc)",
    ]);
  });
});
