// Each executor of a run in a child process of its own (bench/pacing.ts `--executor-child`).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { args } from './settings.ts';
import { spawned } from './support.ts';

/** The entry point the children run: bench/pacing.ts, with `--executor-child`. */
const ENTRY = new URL('../pacing.ts', import.meta.url);

/**
 * One child process (bench/pacing.ts, `--executor-child`) per spec, started together once all are
 * ready; each answers with what it measured (a CapacityPart or a quota Run).
 */
export async function inChildren(specs: Array<{ kind: 'capacity' | 'quota' }>) {
  const children = specs.map((spec) => {
    const child = fork(ENTRY, ['--executor-child', JSON.stringify(spec), ...passedOn()], {
      execArgv: process.execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    spawned.push(child);
    return child;
  });
  await Promise.all(children.map((child) => once(child, 'message')));
  const startMs = Date.now() + 50;
  const parts = children.map(async (child) => {
    const gathered = once(child, 'message');
    child.send({ startMs });
    const [part] = (await gathered) as [unknown];
    return part;
  });
  return { startMs, parts };
}

/** The options an executor process must run with as this one does. */
function passedOn(): string[] {
  const out: string[] = ['--free-for', String(args['free-for'])];
  if (args['book-ahead'] !== undefined) out.push('--book-ahead', String(args['book-ahead']));
  if (args['no-park']) out.push('--no-park');
  if (args['no-slot-wait']) out.push('--no-slot-wait');
  if (args['park-per-worker'] !== undefined) out.push('--park-per-worker', String(args['park-per-worker']));
  if (args['park-max'] !== undefined) out.push('--park-max', String(args['park-max']));
  return out;
}
