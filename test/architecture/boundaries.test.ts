import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/processes.ts';

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' ? [] : sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

const SERVICES = ['gateway', 'policy', 'audit', 'sandbox'];

describe('architecture', () => {
  it('services never import each other; only services/standalone composes several', () => {
    const violations: string[] = [];
    for (const service of [...SERVICES, 'core']) {
      for (const file of sourceFiles(join(repoRoot, 'services', service, 'src'))) {
        const text = readFileSync(file, 'utf8');
        for (const other of SERVICES.filter((s) => s !== service)) {
          if (new RegExp(`from ['"]@portcullis/${other}['"/]`).test(text) || text.includes(`../../${other}/`)) {
            violations.push(`${file.slice(repoRoot.length)} imports ${other}`);
          }
        }
      }
    }
    expect(violations).toEqual([]);
  });

  it('only config modules read process.env in product code', () => {
    const readers = SERVICES.concat('core', 'standalone')
      .flatMap((s) => sourceFiles(join(repoRoot, 'services', s, 'src')))
      .filter((f) => !f.endsWith('.test.ts') && !f.includes('/testing/'))
      .filter((f) => /process\.env\b/.test(readFileSync(f, 'utf8')))
      .map((f) => f.slice(repoRoot.length));
    for (const file of readers) expect(file).toMatch(/(config|main)\.ts$/);
  });
});
