import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger, lazyChild } from './index.ts';

/** A logger of the service's own settings whose lines land in `lines`, timestamps blanked. */
function recording(level = 'info') {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk).replace(/"time":"[^"]+"/, '"time":""'));
      done();
    },
  });
  return { logger: createLogger({ level, destination: stream }), lines };
}

describe('lazyChild', () => {
  it('writes the lines a child with the same bindings writes, byte for byte', async () => {
    const { logger, lines } = recording();
    const eager = logger.child({ requestId: 'r-1' }).child({ client: 'billing' });
    const lazy = lazyChild(logger, { requestId: 'r-1' }).with({ client: 'billing' });
    const err = new Error('boom');
    for (const log of [eager, lazy]) {
      log.warn({ err, tryCount: 2, request: { headers: { authorization: 'secret' } } }, 'call failed');
      log.info('plain %s', 'message');
      log.error({ status: 500 }, 'answered');
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines).toHaveLength(6);
    expect(lines.slice(3)).toEqual(lines.slice(0, 3));
    expect(lines[0]).toContain('"requestId":"r-1","client":"billing"');
    expect(lines[0]).toContain('[redacted]');
  });

  it('makes no child for lines below the level, one for the first line written', () => {
    const { logger } = recording('info');
    const child = vi.spyOn(logger, 'child');
    const lazy = lazyChild(logger, { requestId: 'r-2' });
    lazy.debug({ status: 200 }, 'target answered');
    expect(child).not.toHaveBeenCalled();
    lazy.info('one');
    lazy.warn('two');
    expect(child).toHaveBeenCalledTimes(1);
  });
});
