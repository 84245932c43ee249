/**
 * Writes the contract's JSON Schemas to `contracts/` at the repository root, or with `--check`
 * fails when the checked-in files differ from what the zod schemas generate (CI runs that, so a
 * contract change cannot ship without its published schema).
 *
 *   pnpm run contracts:emit     pnpm run contracts:check
 *
 * `--dir <path>` points at another folder (tests use it); the default is the repository's.
 */
import { fileURLToPath } from 'node:url';
import { contractFiles } from '../src/contract/json-schema.ts';
import { writeOrCheck } from './generated-files.ts';

function contractsDirFromArgs(args: string[]): string {
  const i = args.indexOf('--dir');
  const given = i >= 0 ? args[i + 1] : undefined;
  if (given !== undefined) return given.endsWith('/') ? given : `${given}/`;
  return fileURLToPath(new URL('../../../contracts/', import.meta.url));
}

const contractsDir = contractsDirFromArgs(process.argv.slice(2));

process.exitCode = writeOrCheck(
  contractFiles().map(({ fileName, text }) => ({
    path: `${contractsDir}${fileName}`,
    label: `contracts/${fileName}`,
    text,
  })),
  { check: process.argv.includes('--check'), emitCommand: 'pnpm run contracts:emit' },
);
