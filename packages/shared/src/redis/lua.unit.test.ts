import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readLuaCommands } from './lua.ts';

describe('readLuaCommands', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lua-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('inlines shared includes from redis/includes/ next to the module’s own, each once', () => {
    mkdirSync(join(dir, 'includes'));
    writeFileSync(
      join(dir, 'includes', 'state.lua'),
      '--- @include "shared/now"\nlocal function state() end\n',
    );
    writeFileSync(
      join(dir, 'admit-2.lua'),
      '--- @include "shared/now"\n--- @include "includes/state"\nreturn nowMs()\n',
    );
    const lua = readLuaCommands(dir, 'test').get('admit')?.lua ?? '';
    expect(lua.match(/local function nowMs\(\)/g)).toHaveLength(1);
    expect(lua).toContain("redis.call('TIME')");
    expect(lua).toContain('local function state()');
    expect(lua).not.toContain('@include');
  });

  it('gives every `<op>.lua` of a layout directory the layout’s key count, and refuses other names', () => {
    const layout = mkdtempSync(join(tmpdir(), 'lua-layout-'));
    try {
      writeFileSync(join(layout, 'take.lua'), 'return 1\n');
      expect(readLuaCommands(layout, 'test', { layoutKeys: 3 }).get('take')).toMatchObject({
        command: 'testTake',
        numberOfKeys: 3,
      });
      writeFileSync(join(layout, 'give-2.lua'), 'return 2\n');
      expect(() => readLuaCommands(layout, 'test', { layoutKeys: 3 })).toThrow(
        /give-2\.lua is not named <op>\.lua/,
      );
    } finally {
      rmSync(layout, { recursive: true, force: true });
    }
  });
});
