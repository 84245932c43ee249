/**
 * Writes the contract's JSON Schemas to `contracts/` at the repository root, or with `--check`
 * fails when the checked-in files differ from what the zod schemas generate (CI runs that, so a
 * contract change cannot ship without its published schema).
 *
 *   pnpm run contracts:emit     pnpm run contracts:check
 *
 * `--dir <path>` points at another folder (tests use it); the default is the repository's.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { contractFiles } from '../src/contract/json-schema.ts';

function contractsDirFromArgs(args: string[]): string {
  const i = args.indexOf('--dir');
  const given = i >= 0 ? args[i + 1] : undefined;
  if (given !== undefined) return given.endsWith('/') ? given : `${given}/`;
  return fileURLToPath(new URL('../../../contracts/', import.meta.url));
}

const contractsDir = contractsDirFromArgs(process.argv.slice(2));

function staleFiles(): string[] {
  return contractFiles()
    .filter(({ fileName, text }) => {
      const path = `${contractsDir}${fileName}`;
      return !existsSync(path) || readFileSync(path, 'utf8') !== text;
    })
    .map(({ fileName }) => `contracts/${fileName}`);
}

function check(): number {
  const stale = staleFiles();
  if (stale.length === 0) {
    console.log('contracts are up to date');
    return 0;
  }
  console.error(
    `out of date with the zod schemas in packages/shared/src/contract: ${stale.join(', ')}\n` +
      'run `pnpm run contracts:emit` and commit the result',
  );
  return 1;
}

function emit(): number {
  mkdirSync(contractsDir, { recursive: true });
  for (const { fileName, text } of contractFiles()) {
    writeFileSync(`${contractsDir}${fileName}`, text);
    console.log(`wrote contracts/${fileName}`);
  }
  return 0;
}

process.exitCode = process.argv.includes('--check') ? check() : emit();
