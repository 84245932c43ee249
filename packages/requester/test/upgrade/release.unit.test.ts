import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { previousVersion, ROOT, releaseCommit } from './release.fixture.ts';

const SAMPLE = `# Changelog

## Unreleased (0.3.0)
- a fix, see commit \`aaaaaaa\` (not a release)

## 0.2.0

The second release, tag \`v0.2.0\` (commit \`0123456789abcdef\`).

## 0.1.0

The first, commit \`fedcba9\`.
`;

describe('the previous release for the upgrade tier', () => {
  it('is the first X.Y.Z heading, and the commit its own section names', () => {
    expect(previousVersion(SAMPLE)).toBe('0.2.0');
    expect(releaseCommit(SAMPLE, '0.2.0')).toBe('0123456789abcdef');
    expect(releaseCommit(SAMPLE, '0.1.0')).toBe('fedcba9');
    expect(releaseCommit(SAMPLE, '0.0.9')).toBeUndefined();
    expect(
      releaseCommit('## 1.0.0\n\nno hash here\n\n## 0.9.0\ncommit `abcdef1`\n', '1.0.0'),
    ).toBeUndefined();
  });

  it('this CHANGELOG names a commit of this history for its newest release (a clone without tags finds it)', () => {
    const changelog = readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
    const commit = releaseCommit(changelog, previousVersion(changelog));
    expect(commit).toMatch(/^[0-9a-f]{7,40}$/);
    const git = (...args: string[]) => execFileSync('git', ['-C', ROOT, ...args], { stdio: 'pipe' });
    // A shallow clone may lack it; the tier then fetches the tag from origin.
    if (git('rev-parse', '--is-shallow-repository').toString().trim() === 'true') return;
    expect(() => git('merge-base', '--is-ancestor', commit as string, 'HEAD')).not.toThrow();
  });
});
