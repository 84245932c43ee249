import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { configMarkdownTable } from '@requester/shared';

/**
 * Writes the configuration table into README.md between its markers; with `--check`, fails when
 * the README is out of date (CI runs the check, so the table never drifts from the schema).
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

if (process.argv.includes('--check')) {
  if (wanted !== text) {
    process.stderr.write('README.md configuration table is out of date: run `pnpm run docs:emit`\n');
    process.exit(1);
  }
} else if (wanted !== text) {
  writeFileSync(README, wanted);
  process.stderr.write('README.md configuration table updated\n');
}
