import { readFileSync } from 'node:fs';
import path from 'node:path';
import { decisionsMarkdown } from '@requester/executor/attempt/diagram';
import { configMarkdownTable } from '@requester/shared/config';
import { parse, stringify } from 'yaml';
import { betweenMarkers, readIfExists, writeOrCheck } from '../../shared/scripts/generated-files.ts';

/**
 * Writes the configuration table into README.md between its markers, the executor's decisions
 * (its chain of gates) into docs/architecture.md between theirs, and the alert rules of
 * infra/prometheus/alerts.yml into the PrometheusRule of infra/k8s; with `--check`, fails when
 * any is out of date (CI runs the check, so none drifts from its source).
 */
const README = path.resolve(import.meta.dirname, '../../../README.md');
const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';

const wanted = betweenMarkers(readIfExists(README), START, END, configMarkdownTable());

const ARCHITECTURE = path.resolve(import.meta.dirname, '../../../docs/architecture.md');
const CHAIN_START = '<!-- executor-decisions:start -->';
const CHAIN_END = '<!-- executor-decisions:end -->';
const wantedArchitecture = betweenMarkers(
  readIfExists(ARCHITECTURE),
  CHAIN_START,
  CHAIN_END,
  decisionsMarkdown(),
);

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
process.exitCode = writeOrCheck(
  [
    { path: README, label: 'README.md configuration table', text: wanted },
    { path: ARCHITECTURE, label: "docs/architecture.md executor's decisions", text: wantedArchitecture },
    { path: K8S_RULES, text: wantedRules },
  ],
  { check: process.argv.includes('--check'), emitCommand: 'pnpm run docs:emit' },
);
