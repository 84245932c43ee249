import type { VariableSpec } from './variable.ts';
import { CONFIG_VARIABLES } from './variables/index.ts';

/** The README configuration table (kept in sync by `pnpm run docs:check`). */
export function configMarkdownTable(): string {
  const rows = Object.values(CONFIG_VARIABLES).map(
    (spec: VariableSpec) =>
      `| \`${spec.env}\` | ${spec.default === undefined ? '—' : `\`${spec.default}\``} | ${spec.description} |`,
  );
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}
