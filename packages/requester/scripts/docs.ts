import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { decisionsMarkdown } from '@requester/executor/attempt/diagram';
import { configMarkdownTable } from '@requester/shared/config';
import { parse, stringify } from 'yaml';

/**
 * Writes the configuration table into README.md between its markers, the executor's decisions
 * (its chain of gates) into docs/architecture.md between theirs, and the alert rules of
 * infra/prometheus/alerts.yml into the PrometheusRule of infra/k8s; with `--check`, fails when
 * any is out of date (CI runs the check, so none drifts from its source).
 */
const README = path.resolve(import.meta.dirname, '../../../README.md');
const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';

const text = readFileSync(README, 'utf8');
const [before, rest] = text.split(START);
const after = rest?.split(END)[1];
if (before === undefined || after === undefined)
  throw new Error(`README.md lacks the ${START} … ${END} markers`);
const wanted = `${before}${START}\n${configMarkdownTable()}\n${END}${after}`;

const ARCHITECTURE = path.resolve(import.meta.dirname, '../../../docs/architecture.md');
const CHAIN_START = '<!-- executor-decisions:start -->';
const CHAIN_END = '<!-- executor-decisions:end -->';
const architecture = readFileSync(ARCHITECTURE, 'utf8');
const [chainBefore, chainRest] = architecture.split(CHAIN_START);
const chainAfter = chainRest?.split(CHAIN_END)[1];
if (chainBefore === undefined || chainAfter === undefined)
  throw new Error(`docs/architecture.md lacks the ${CHAIN_START} … ${CHAIN_END} markers`);
const wantedArchitecture = `${chainBefore}${CHAIN_START}\n${decisionsMarkdown()}\n${CHAIN_END}${chainAfter}`;

const RULES = path.resolve(import.meta.dirname, '../../../infra/prometheus/alerts.yml');
const K8S_RULES = path.resolve(import.meta.dirname, '../../../infra/k8s/base/prometheus-rule.yaml');
const rule = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: { name: 'requester' },
  spec: { groups: parse(readFileSync(RULES, 'utf8')).groups },
};
const wantedRules =
  '# Generated from infra/prometheus/alerts.yml by `pnpm run docs:emit` (docs:check fails on drift):\n' +
  '# the same alert rules, for the Prometheus Operator. Edit alerts.yml, never this file.\n' +
  stringify(rule, { lineWidth: 0 });
let rulesText = '';
try {
  rulesText = readFileSync(K8S_RULES, 'utf8');
} catch {}

if (process.argv.includes('--check')) {
  const stale = [
    ...(wanted !== text ? ['README.md configuration table'] : []),
    ...(wantedArchitecture !== architecture ? ["docs/architecture.md executor's decisions"] : []),
    ...(wantedRules !== rulesText ? ['infra/k8s/base/prometheus-rule.yaml'] : []),
  ];
  if (stale.length > 0) {
    process.stderr.write(`${stale.join(' and ')} out of date: run \`pnpm run docs:emit\`\n`);
    process.exit(1);
  }
} else {
  if (wanted !== text) {
    writeFileSync(README, wanted);
    process.stderr.write('README.md configuration table updated\n');
  }
  if (wantedArchitecture !== architecture) {
    writeFileSync(ARCHITECTURE, wantedArchitecture);
    process.stderr.write("docs/architecture.md executor's decisions updated\n");
  }
  if (wantedRules !== rulesText) {
    writeFileSync(K8S_RULES, wantedRules);
    process.stderr.write('infra/k8s/base/prometheus-rule.yaml updated\n');
  }
}
