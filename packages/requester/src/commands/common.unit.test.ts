import { hostname, userInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cliActor, formatTable } from './common.ts';

describe('human output of the admin commands', () => {
  it('aligns columns without an index column, numbers to the right, and says (none) when empty', () => {
    const table = formatTable([
      { origin: 'https://a.example:443', failures: 3, openUntil: 'in 2m' },
      { origin: 'http://b:80', failures: 12, openUntil: undefined },
    ]);
    expect(table).toBe(
      'ORIGIN                 FAILURES  OPEN UNTIL\n' +
        'https://a.example:443         3  in 2m\n' +
        'http://b:80                  12  -\n',
    );
    expect(formatTable([])).toBe('(none)\n');
  });
});

describe('the actor of admin commands', () => {
  it('is cli:<CLI_ACTOR> when set, else cli:<os user>@<host name>', () => {
    expect(cliActor({ CLI_ACTOR: 'alice' })).toBe('cli:alice');
    expect(cliActor({})).toBe(`cli:${userInfo().username}@${hostname()}`);
  });
});
