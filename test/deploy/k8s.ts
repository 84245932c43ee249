import { execFileSync } from 'node:child_process';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parseAllDocuments } from 'yaml';
import { routerGroupOf } from '../../packages/shared/src/config/index.ts';
import { durationToMs } from '../../packages/shared/src/time/duration.ts';

/**
 * Offline checks of the Kubernetes manifests (infra/k8s): each overlay is rendered with
 * `kubectl kustomize`, every object is validated against its Kubernetes (or KEDA) schema, and the
 * rules of infra/k8s/README.md are checked. No cluster is needed.
 */

export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: a manifest is arbitrary YAML until validated
  [key: string]: any;
};

interface Validatable {
  validate(): void;
}

const MODELS: Record<string, new (data: never) => Validatable> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

export function render(overlayDir: string): Manifest[] {
  const text = execFileSync('kubectl', ['kustomize', overlayDir], { encoding: 'utf8' });
  return parseAllDocuments(text).map((doc) => doc.toJS() as Manifest);
}

/** Schema problems of one object (empty = valid); an unknown kind is a problem too. */
export function schemaProblems(object: Manifest): string[] {
  const Model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (!Model) return [`${object.kind} ${object.metadata?.name}: no schema known for ${object.apiVersion}`];
  try {
    new Model(withoutWrappedBase64(object) as never).validate();
    return [];
  } catch (err) {
    return [`${object.kind} ${object.metadata.name}: ${err instanceof Error ? err.message : String(err)}`];
  }
}

/**
 * kustomize wraps long base64 values of a Secret over lines; the API server reads them as Go's
 * base64 decoder does, ignoring the newlines, while the schema's `byte` format does not.
 */
function withoutWrappedBase64(object: Manifest): Manifest {
  if (object.kind !== 'Secret' || !object.data) return object;
  const data = Object.fromEntries(
    Object.entries(object.data as Record<string, string>).map(([key, value]) => [
      key,
      value.replace(/\n/g, ''),
    ]),
  );
  return { ...object, data };
}

/** A Deployment of a Requester role (not a dependency an overlay brings along). */
export function isRole(object: Manifest): boolean {
  return object.kind === 'Deployment' && object.metadata.labels?.['app.kubernetes.io/name'] === 'requester';
}

function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** The rules every overlay keeps (infra/k8s/README.md); returns what breaks them. */
export function ruleProblems(objects: Manifest[], roleNames: readonly string[]): string[] {
  const problems: string[] = [];
  const of = (kind: string) => objects.filter((object) => object.kind === kind);
  const config = of('ConfigMap').find((map) => map.metadata.name.startsWith('requester-config'));
  // Read as the service reads it (SHUTDOWN_TIMEOUT is a Go-style duration).
  const shutdownSeconds = durationToMs(config?.data?.SHUTDOWN_TIMEOUT ?? '30s') / 1000;
  const partitions = Number(config?.data?.KAFKA_TOPIC_PARTITIONS ?? 12);
  problems.push(...applyProblems(objects, config));
  // The roles; the dev overlay also runs Kafka, Redis and PostgreSQL, which these rules are not about.
  for (const deployment of of('Deployment').filter(isRole)) {
    const name = deployment.metadata.name;
    const say = (problem: string) => problems.push(`Deployment ${name}: ${problem}`);
    const pod = deployment.spec.template.spec;
    const labels = deployment.spec.template.metadata.labels ?? {};
    const container = pod.containers?.[0];
    if (!container) {
      say('no container');
      continue;
    }
    if (container.livenessProbe?.httpGet?.path !== '/healthz') say('liveness probe is not /healthz');
    if (container.readinessProbe?.httpGet?.path !== '/readyz') say('readiness probe is not /readyz');
    const { requests, limits } = container.resources ?? {};
    if (!requests?.cpu || !requests?.memory || !limits?.memory)
      say('cpu/memory requests or memory limit missing');
    if (pod.securityContext?.runAsNonRoot !== true) say('may run as root');
    if (container.securityContext?.readOnlyRootFilesystem !== true) say('root filesystem is writable');
    if (container.securityContext?.allowPrivilegeEscalation !== false) say('allows privilege escalation');
    if (!((pod.terminationGracePeriodSeconds ?? 30) > shutdownSeconds))
      say(`terminationGracePeriodSeconds must exceed SHUTDOWN_TIMEOUT (${shutdownSeconds}s)`);
    const args: string[] = container.args ?? [];
    const roles = args[args.indexOf('--role') + 1]?.split(',') ?? [];
    if (args.indexOf('--role') < 0 || roles.some((role) => role !== 'all' && !roleNames.includes(role)))
      say(`--role ${roles.join(',')} is not a list of ${roleNames.join(', ')}`);
    const pdbs = of('PodDisruptionBudget').filter((pdb) => matches(pdb.spec.selector.matchLabels, labels));
    if (pdbs.length !== 1) say(`${pdbs.length} PodDisruptionBudgets select it (want 1)`);
    const hpas = of('HorizontalPodAutoscaler').filter((hpa) => hpa.spec.scaleTargetRef.name === name);
    const scaled = of('ScaledObject').filter((object) => object.spec.scaleTargetRef.name === name);
    if (hpas.length + scaled.length !== 1)
      say(`${hpas.length} HPAs and ${scaled.length} ScaledObjects scale it (want exactly one autoscaler)`);
    if (roles.includes('router')) {
      const max = hpas[0]?.spec.maxReplicas ?? scaled[0]?.spec.maxReplicaCount;
      if (max > partitions) say(`routers may scale to ${max}, beyond the ${partitions} partitions of in`);
      if (!scaled[0]?.spec.triggers?.some((t: { type: string }) => t.type === 'kafka'))
        say('routers must scale on the lag of in (a KEDA kafka trigger), not on CPU');
    }
    const init = pod.initContainers?.find((c: { name: string }) => c.name === 'migrate');
    if (init?.args?.[0] !== 'migrate')
      say('no `migrate` init container: migrations would not run before the rollout');
    for (const source of container.envFrom ?? []) {
      const ref = source.configMapRef ?? source.secretRef;
      const kind = source.configMapRef ? 'ConfigMap' : 'Secret';
      const external = kind === 'Secret' && !objects.some((object) => object.kind === 'Secret');
      if (!external && !of(kind).some((object) => object.metadata.name === ref.name))
        say(`envFrom names ${kind} ${ref.name}, which the overlay does not define`);
    }
  }
  return problems;
}

/**
 * What `kubectl apply -k` of the overlay needs to work on a first try, and to keep working: the
 * namespace it names, a hash-suffixed config (a changed setting rolls the pods), autoscaler
 * queries and triggers that agree with the overlay's namespace and settings, a PodMonitor, and a
 * NetworkPolicy that keeps the admin port closed to all but named sources.
 */
function applyProblems(objects: Manifest[], config: Manifest | undefined): string[] {
  const problems: string[] = [];
  const of = (kind: string) => objects.filter((object) => object.kind === kind);
  const namespaces = new Set(objects.flatMap((o) => (o.metadata.namespace ? [o.metadata.namespace] : [])));
  for (const namespace of namespaces)
    if (!of('Namespace').some((ns) => ns.metadata.name === namespace))
      problems.push(`Namespace ${namespace}: used by the overlay but not created by it`);
  if (!config) problems.push('ConfigMap requester-config: missing');
  else if (config.metadata.name === 'requester-config')
    problems.push('ConfigMap requester-config: no hash suffix (a changed setting would restart nothing)');
  const settings: Record<string, string> = config?.data ?? {};
  for (const scaled of of('ScaledObject')) {
    const say = (problem: string) => problems.push(`ScaledObject ${scaled.metadata.name}: ${problem}`);
    for (const trigger of scaled.spec.triggers ?? []) {
      const meta = trigger.metadata ?? {};
      if (trigger.type === 'prometheus') {
        const selectors: string[] = meta.query.match(/\{[^}]*\}/g) ?? [];
        const wanted = `namespace="${scaled.metadata.namespace}"`;
        if (selectors.length === 0 || selectors.some((selector) => !selector.includes(wanted)))
          say(`every selector of the query must filter on ${wanted}`);
        if (meta.ignoreNullValues !== 'false' || !scaled.spec.fallback)
          say('an empty Prometheus answer must fail the poll (ignoreNullValues "false") with a fallback');
      }
      if (trigger.type === 'kafka') {
        const group = routerGroupOf({
          kafkaRouterGroup: settings.KAFKA_ROUTER_GROUP,
          kafkaClientId: settings.KAFKA_CLIENT_ID ?? 'requester',
          topicIn: settings.KAFKA_TOPIC_IN ?? 'requester.in',
        });
        const topic = settings.KAFKA_TOPIC_IN ?? 'requester.in';
        if (meta.bootstrapServers !== settings.KAFKA_BROKERS)
          say(`bootstrapServers ${meta.bootstrapServers} is not KAFKA_BROKERS ${settings.KAFKA_BROKERS}`);
        if (meta.consumerGroup !== group || meta.topic !== topic)
          say(`must read the lag of group ${group} on ${topic}`);
        if (meta.allowIdleConsumers !== 'false')
          say('allowIdleConsumers must be "false" (capped at the partitions)');
        // KEDA connects from its own namespace: `kafka` or `kafka-0.kafka` resolve only in this one.
        const local = String(meta.bootstrapServers)
          .split(',')
          .map((server) => server.trim().replace(/:\d+$/, ''))
          .filter((host) => host.split('.').length < 3 && !/^[\d.]+$/.test(host));
        if (local.length > 0)
          say(
            `bootstrapServers ${local.join(', ')}: not resolvable from KEDA's namespace (qualify it: <service>.<namespace>.svc)`,
          );
      }
    }
  }
  const monitors = of('PodMonitor').filter((monitor) =>
    monitor.spec.podMetricsEndpoints?.some((endpoint: { port?: string }) => endpoint.port === 'admin'),
  );
  if (monitors.length !== 1) problems.push(`${monitors.length} PodMonitors scrape the admin port (want 1)`);
  const policies = of('NetworkPolicy');
  if (policies.length === 0) problems.push('no NetworkPolicy: the admin port is open to every pod');
  for (const policy of policies)
    for (const rule of policy.spec.ingress ?? [])
      if (
        !rule.from?.length &&
        (!rule.ports || rule.ports.some((p: { port?: unknown }) => p.port === 'admin'))
      )
        problems.push(`NetworkPolicy ${policy.metadata.name}: opens the admin port to every source`);
  return problems;
}
