#!/usr/bin/env node
// Builds the dashboard (web/ → web/build) unless the build is newer than every source file,
// so `npm start` and `npm test` always serve the current dashboard without rebuilding each time.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const web = fileURLToPath(new URL('../web/', import.meta.url));
const built = join(web, process.env.WEB_BUILD_DIR ?? 'build', 'handler.js');

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

const sources = Math.max(newest(join(web, 'src')), ...['svelte.config.js', 'vite.config.ts', 'package.json'].map((f) => statSync(join(web, f)).mtimeMs));
if (existsSync(built) && statSync(built).mtimeMs >= sources) process.exit(0);
console.log('building the dashboard (web/)…');
const result = spawnSync('npx', ['vite', 'build', '--logLevel', 'warn'], { cwd: web, stdio: 'inherit' });
process.exit(result.status ?? 1);
