import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPg } from '../../packages/shared/src/pg/index.ts';
import { freePort, TEST_DATABASE_URL, uniqueName } from '../../packages/shared/src/testing/index.ts';

/**
 * No Docker engine runs here, so this builds the tree the image copies (infra/image/prod-tree.sh,
 * which the Dockerfile runs too) and starts it the way the image does: only production
 * dependencies, no tests, Node 24 from PATH. A source that imports a dev dependency, or a file the
 * tree forgets, fails here.
 */
const ROOT = join(import.meta.dirname, '../..');
const PATH_WITH_NODE_24 = `${dirname(process.execPath)}:${process.env.PATH}`;

describe('the production tree of the image', () => {
  let tree: string;
  let bin: string;

  beforeAll(() => {
    tree = join(mkdtempSync(join(tmpdir(), 'requester-image-')), 'app');
    execFileSync('bash', [join(ROOT, 'infra/image/prod-tree.sh'), tree], {
      // pnpm from PATH: `./dev` puts the one it installed there.
      env: { ...process.env, PATH: PATH_WITH_NODE_24 },
      stdio: 'pipe',
    });
    bin = join(tree, 'packages/requester/bin/requester');
  }, 120_000);

  afterAll(() => rmSync(dirname(tree), { recursive: true, force: true }));

  it('holds no dev dependency and no test file', () => {
    const files = execFileSync('find', [tree, '-name', '*.test.ts', '-not', '-path', '*/node_modules/*'], {
      encoding: 'utf8',
    });
    expect(files).toBe('');
    for (const dev of ['vitest', 'typescript', '@biomejs/biome', 'fast-check'])
      expect(() => execFileSync('test', ['-e', join(tree, 'node_modules', dev)])).toThrow();
  });

  it('installs kafkajs with the patch of patches/ and the native CRC-32C', () => {
    const probe =
      "const crc = require('kafkajs/src/protocol/recordBatch/crc32C'); require('@node-rs/crc32');" +
      'process.stdout.write(typeof crc.use)';
    const kind = execFileSync('node', ['-e', probe], {
      cwd: join(tree, 'packages/shared'),
      encoding: 'utf8',
      env: { ...process.env, PATH: PATH_WITH_NODE_24 },
    });
    expect(kind).toBe('function');
  });

  it('answers --help', () => {
    const help = execFileSync(bin, ['--help'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: PATH_WITH_NODE_24 },
    });
    expect(help).toMatch(/Usage: requester --role <roles>/);
  });

  it('puts requester on PATH as the Dockerfile does, and creates a key from there', async () => {
    // The Dockerfile's link, made the same way in a folder of our own that stands for /usr/local/bin.
    const link = /^RUN ln -s \/app\/(\S+) \/usr\/local\/bin\/requester$/m.exec(
      readFileSync(join(ROOT, 'Dockerfile'), 'utf8'),
    );
    expect(link?.[1]).toBe('packages/requester/bin/requester');
    const pathDir = join(dirname(tree), 'usr-local-bin');
    mkdirSync(pathDir);
    symlinkSync(join(tree, link![1]!), join(pathDir, 'requester'));
    const database = uniqueName('image_keys').replaceAll('-', '_');
    const env = {
      ...process.env,
      PATH: `${pathDir}:${PATH_WITH_NODE_24}`,
      NODE_ENV: 'production',
      DATABASE_URL: TEST_DATABASE_URL.replace(/\/[^/]*$/, `/${database}`),
    };
    try {
      const token = execFileSync('requester', ['keys', 'create', '--name', 'ops', '--admin', 'write'], {
        encoding: 'utf8',
        env,
      });
      expect(token.trim()).toMatch(/^rqk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
      const keys = JSON.parse(
        execFileSync('requester', ['keys', 'list', '--json'], { encoding: 'utf8', env }),
      );
      expect(keys).toEqual([expect.objectContaining({ name: 'ops', admin: 'write' })]);
    } finally {
      const admin = createPg({ url: TEST_DATABASE_URL.replace(/\/[^/]*$/, '/postgres'), max: 1 });
      await admin.unsafe(`drop database if exists "${database}" with (force)`).catch(() => {});
      await admin.end({ timeout: 5 });
    }
  }, 60_000);

  it('runs a role until ready, and drains on SIGTERM', async () => {
    const name = uniqueName('image');
    const adminPort = await freePort();
    const child = spawn(bin, ['--role', 'relay', '--admin-port', String(adminPort)], {
      env: {
        ...process.env,
        PATH: PATH_WITH_NODE_24,
        NODE_ENV: 'production',
        DATABASE_URL: TEST_DATABASE_URL,
        KAFKA_TOPIC_IN: `${name}.in`,
        KAFKA_TOPIC_OUT: `${name}.out`,
        KAFKA_TOPIC_DLQ: `${name}.dlq`,
        KAFKA_TOPIC_EVENTS: `${name}.events`,
        KAFKA_TOPIC_PARTITIONS: '1',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const deadline = Date.now() + 45_000;
      let ready = false;
      while (!ready && Date.now() < deadline && child.exitCode === null) {
        ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (!ready) await new Promise((r) => setTimeout(r, 250));
      }
      expect(ready).toBe(true);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
