import { CHAIN } from './chain.ts';
import type { GateSpec } from './gate.ts';

/**
 * The executor's decisions as docs/architecture.md §5 shows them, generated from CHAIN by
 * `pnpm run docs:emit` (and checked by `docs:check`), so the picture cannot drift from the order
 * the code runs.
 */
export function decisionsMarkdown(chain: readonly GateSpec[] = CHAIN): string {
  return `${mermaidOf(chain)}\n\n${tableOf(chain)}`;
}

/** Mermaid quotes its labels; a quote inside one is written as an entity, backticks dropped. */
const label = (text: string) => `"${text.replaceAll('`', '').replaceAll('"', '#quot;')}"`;

function mermaidOf(chain: readonly GateSpec[]): string {
  const lines = [
    '```mermaid',
    'flowchart TD',
    `  leased(${label('task leased (a wake-up is answered at once)')})`,
  ];
  let previous = 'leased';
  for (const gate of chain) {
    lines.push(`  ${gate.name}[${label(`${gate.name}: ${gate.does}`)}]`);
    lines.push(`  ${previous} --> ${gate.name}`);
    gate.exits.forEach((exit, i) => {
      const id = `${gate.name}_${i}`;
      lines.push(`  ${id}(${label(exit.becomes)})`);
      lines.push(`  ${gate.name} -- ${label(exit.when)} --> ${id}`);
    });
    previous = gate.name;
  }
  lines.push('```');
  return lines.join('\n');
}

function tableOf(chain: readonly GateSpec[]): string {
  const rows = ['| # | link | does | ends the attempt when | as |', '|---|---|---|---|---|'];
  chain.forEach((gate, i) => {
    const [first, ...more] = gate.exits;
    rows.push(
      `| ${i + 1} | \`${gate.name}\` | ${gate.does} | ${first?.when ?? '—'} | ${first?.becomes ?? '—'} |`,
    );
    for (const exit of more) rows.push(`| | | | ${exit.when} | ${exit.becomes} |`);
  });
  return rows.join('\n');
}
