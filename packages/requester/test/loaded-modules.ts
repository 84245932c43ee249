import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

/**
 * A preload (`--import`) that records every module the process loads, ESM and CommonJS alike, and
 * writes their URLs, one a line, to $LOADED_MODULES_FILE when the process exits: what a command
 * line costs to start, without a timing (main.test.ts).
 */
const loaded = new Set<string>();
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    loaded.add(resolved.url);
    return resolved;
  },
});
process.on('exit', () => {
  const file = process.env.LOADED_MODULES_FILE;
  if (file) writeFileSync(file, [...loaded].join('\n'));
});
