/**
 * The child process of `startPacedTargetProcess` (paced-target.ts): serves a paced target and
 * answers its parent's messages (`arrivals`, `concurrent`, `close`) over IPC.
 */
import { type PacedTargetSpec, startPacedTarget } from './paced-target.ts';

const target = await startPacedTarget(JSON.parse(process.argv[2] ?? '{}') as PacedTargetSpec);
process.send?.({ url: target.url });
process.on('message', (message: { op: string; n?: number }) => {
  if (message.op === 'arrivals') process.send?.({ arrivals: target.arrivals });
  else if (message.op === 'concurrent') target.setConcurrent(message.n ?? 1);
  else if (message.op === 'close') void target.close().then(() => process.exit(0));
});
// Its parent gone (killed, or ended without closing it): nothing will ask for it any more.
process.on('disconnect', () => process.exit(0));
