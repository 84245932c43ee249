/**
 * The one way the repository's generators write what they generate, or (`--check`, run by CI)
 * fail when a checked-in copy differs: the contracts, the client's types and reference, the
 * README's configuration table, the PrometheusRule.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The repository's root, for the names the messages show. */
const ROOT = path.resolve(import.meta.dirname, '../../..');

export interface GeneratedFile {
  /** Absolute path of the file. */
  path: string;
  /** What it is, as a user reads it in a message; the path from the root by default. */
  label?: string;
  text: string;
}

/** The file's text, or '' when it does not exist yet. */
export function readIfExists(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

/**
 * `text` with what stands between the `start` and `end` marker lines replaced by `body`; throws
 * when a marker is missing, so a generator never appends a second copy.
 */
export function betweenMarkers(text: string, start: string, end: string, body: string): string {
  const [before, rest] = text.split(start);
  const after = rest?.split(end)[1];
  if (before === undefined || after === undefined)
    throw new Error(`the ${start} … ${end} markers are missing`);
  return `${before}${start}\n${body}\n${end}${after}`;
}

/**
 * With `check`, returns 1 (and says which files and the command that fixes them) when a file
 * differs from its generated text, else 0; without, writes the files that differ. The exit code to set.
 */
export function writeOrCheck(
  files: GeneratedFile[],
  options: { check: boolean; emitCommand: string },
): number {
  const label = (file: GeneratedFile) => file.label ?? path.relative(ROOT, file.path);
  const stale = files.filter((file) => readIfExists(file.path) !== file.text);
  if (options.check) {
    if (stale.length === 0) {
      console.log(`up to date: ${files.map(label).join(', ')}`);
      return 0;
    }
    console.error(
      `out of date: ${stale.map(label).join(', ')}\nrun \`${options.emitCommand}\` and commit the result`,
    );
    return 1;
  }
  for (const file of stale) {
    mkdirSync(path.dirname(file.path), { recursive: true });
    writeFileSync(file.path, file.text);
    console.log(`wrote ${label(file)}`);
  }
  return 0;
}
