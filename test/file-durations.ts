import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';
import { FILE_DURATIONS_PATH } from './longest-first-sequencer.ts';

/** Files quicker than this are left out of the table: their order hardly moves the wall time. */
const SLOW_FILE_SECONDS = 3;

/**
 * Writes test/file-durations.json, the figures the sequencer orders a fresh clone's run by: each
 * file's tests and hooks, in seconds, for files that took SLOW_FILE_SECONDS or more. Refresh it
 * after a whole run that passed, on an otherwise idle box:
 * `vitest run --reporter=default --reporter=./test/file-durations.ts`.
 */
export default class FileDurations implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    if (testModules.some((module) => module.state() === 'failed')) {
      process.stdout.write('file-durations: a file failed, test/file-durations.json left as it was\n');
      return;
    }
    const rows = testModules
      .map((module) => ({
        file: path.relative(process.cwd(), module.moduleId).split(path.sep).join('/'),
        seconds: Math.round(module.diagnostic().duration / 100) / 10,
      }))
      .filter((row) => row.seconds >= SLOW_FILE_SECONDS)
      .sort((a, b) => b.seconds - a.seconds || (a.file < b.file ? -1 : 1));
    const table = Object.fromEntries(rows.map((row) => [row.file, row.seconds]));
    writeFileSync(FILE_DURATIONS_PATH, `${JSON.stringify(table, null, 2)}\n`);
    process.stdout.write(`file-durations: ${rows.length} files written to test/file-durations.json\n`);
  }
}
