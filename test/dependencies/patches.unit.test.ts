import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

/**
 * The dependencies patched through pnpm-workspace.yaml's `patchedDependencies` (patches/README.md).
 * A patch is keyed to one exact version: a range in a package.json lets a lockfile update move to
 * another version, which the patch does not name, and the install then fails (or, for a second
 * copy beside the patched one, runs unpatched).
 */
const ROOT = join(import.meta.dirname, '../..');
const DEPENDENCY_FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies'] as const;

interface Patched {
  name: string;
  version: string;
  file: string;
}

/** `name@version` → name and version; the name may be scoped (`@scope/name@1.2.3`). */
function splitKey(key: string): { name: string; version: string } {
  const at = key.lastIndexOf('@');
  return { name: key.slice(0, at), version: key.slice(at + 1) };
}

function patchedDependencies(): Patched[] {
  const workspace = parse(readFileSync(join(ROOT, 'pnpm-workspace.yaml'), 'utf8')) as {
    patchedDependencies?: Record<string, string>;
  };
  return Object.entries(workspace.patchedDependencies ?? {}).map(([key, file]) => ({
    ...splitKey(key),
    file,
  }));
}

function manifests(): { path: string; json: Record<string, unknown> }[] {
  const paths = [
    'package.json',
    ...readdirSync(join(ROOT, 'packages')).map((dir) => join('packages', dir, 'package.json')),
  ].filter((path) => existsSync(join(ROOT, path)));
  return paths.map((path) => ({ path, json: JSON.parse(readFileSync(join(ROOT, path), 'utf8')) }));
}

/** Each hunk of a unified diff: the file it changes, its header and its added lines. */
function hunks(patch: string): { file: string; header: string; added: string[] }[] {
  const found: { file: string; header: string; added: string[] }[] = [];
  let file = '';
  for (const line of patch.split('\n')) {
    if (line.startsWith('+++ ')) file = line.slice(4).replace(/^b\//, '');
    else if (line.startsWith('@@')) found.push({ file, header: line, added: [] });
    else if (line.startsWith('+')) found.at(-1)?.added.push(line);
  }
  return found;
}

const PATCHED = patchedDependencies();

describe('patched dependencies (pnpm-workspace.yaml patchedDependencies)', () => {
  it('exist, each with its patch file', () => {
    expect(PATCHED.length).toBeGreaterThan(0);
    for (const { file } of PATCHED) expect(existsSync(join(ROOT, file)), file).toBe(true);
  });

  it.each(PATCHED)(
    '$name is required at exactly $version wherever a package.json names it',
    ({ name, version }) => {
      const specifiers = manifests().flatMap(({ path, json }) =>
        DEPENDENCY_FIELDS.flatMap((field) => {
          const specifier = (json[field] as Record<string, string> | undefined)?.[name];
          return specifier === undefined ? [] : [{ where: `${path} ${field}`, specifier }];
        }),
      );
      expect(specifiers.length, `no package.json requires ${name}`).toBeGreaterThan(0);
      for (const { where, specifier } of specifiers) expect(specifier, where).toBe(version);
    },
  );

  it.each(PATCHED)(
    '$name resolves to $version alone in pnpm-lock.yaml, patched everywhere',
    ({ name, version }) => {
      // pnpm writes its own environment (the package manager it installs) as a first document.
      const documents = parseAllDocuments(readFileSync(join(ROOT, 'pnpm-lock.yaml'), 'utf8'));
      const lock = (documents as { toJS(): unknown }[]).map((document) => document.toJS()).at(-1) as {
        patchedDependencies?: Record<string, string>;
        packages: Record<string, unknown>;
        snapshots: Record<string, unknown>;
      };
      expect(Object.keys(lock.patchedDependencies ?? {})).toContain(`${name}@${version}`);
      const resolved = Object.keys(lock.packages).filter((key) => splitKey(key).name === name);
      expect(resolved).toEqual([`${name}@${version}`]);
      const snapshots = Object.keys(lock.snapshots).filter((key) => key.startsWith(`${name}@`));
      expect(snapshots.length).toBeGreaterThan(0);
      for (const snapshot of snapshots) expect(snapshot).toContain('(patch_hash=');
    },
  );

  it('every reference in pnpm-lock.yaml names the hash of the patch as it is now', () => {
    // A merge of two branches that each changed the lock can keep an importer on an older patch's
    // hash: a frozen install accepts it and links a package directory that does not exist.
    const text = readFileSync(join(ROOT, 'pnpm-lock.yaml'), 'utf8');
    const documents = parseAllDocuments(text);
    const lock = (documents as { toJS(): unknown }[]).map((document) => document.toJS()).at(-1) as {
      patchedDependencies?: Record<string, string>;
    };
    const current = new Set(Object.values(lock.patchedDependencies ?? {}));
    const referenced = new Set([...text.matchAll(/patch_hash=([0-9a-f]+)/g)].map((m) => m[1]));
    expect([...referenced].filter((hash) => !current.has(hash as string))).toEqual([]);
  });

  it.each(PATCHED)(
    '$file: every hunk says why (a "Requester patch" comment among its added lines)',
    ({ file }) => {
      const unexplained = hunks(readFileSync(join(ROOT, file), 'utf8'))
        .filter(({ added }) => !added.some((line) => line.includes('Requester patch')))
        .map(({ file: changed, header }) => `${changed} ${header}`);
      expect(unexplained).toEqual([]);
    },
  );

  it.each(PATCHED)('$file has its section in patches/README.md, naming every file it changes', ({ file }) => {
    const readme = readFileSync(join(ROOT, 'patches/README.md'), 'utf8');
    const base = file.replace(/^patches\//, '');
    expect(readme).toContain(`## \`${base}\``);
    const section = readme.slice(readme.indexOf(`## \`${base}\``)).split(/\n## /)[0];
    for (const changed of new Set(hunks(readFileSync(join(ROOT, file), 'utf8')).map((h) => h.file)))
      expect(section, changed).toContain(`\`${changed}\``);
  });
});
