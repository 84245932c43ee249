import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const DEV = path.resolve(import.meta.dirname, '../../dev');

/** What `./dev start` prints once ready, with a local key that `local_key` would hand out. */
function banner(auth: 'on' | 'off'): string {
  const script = `source "$1"; local_key() { echo rqk_0123456789ab_thesecretofthelocalkey; }; ready_banner 8080 9464 ${auth} 2>&1`;
  return execFileSync('bash', ['-c', script, 'banner', DEV], { encoding: 'utf8' });
}

/**
 * The launcher's output may be collected (a CI log, a terminal recording, nohup.out): it shows how
 * to send a request with the local key without printing the key itself.
 */
describe('./dev start banner', () => {
  it('reads the token from .run/local-api-key in the curl, never prints it', () => {
    const text = banner('on');
    expect(text).toContain('curl -s -X POST http://127.0.0.1:8080/request');
    expect(text).toMatch(/authorization: Bearer \$\(cat '[^']*\/\.run\/local-api-key'\)/);
    expect(text).not.toContain('rqk_');
  });

  it('sends no authorization header with AUTH=off', () => {
    expect(banner('off')).not.toMatch(/authorization/);
  });
});
