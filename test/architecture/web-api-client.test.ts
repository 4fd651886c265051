import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness } from '../../services/gateway/src/testing/index.ts';
import { repoRoot } from '../support/processes.ts';

/**
 * The dashboard's API client is checked against the gateway's OpenAPI document: every `/api`
 * path the dashboard's sources spell out (literals and templates; `${…}` segments are
 * parameters) must be a route the gateway publishes, so a renamed or removed route fails here
 * rather than in a browser.
 */
function sourcesOf(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourcesOf(path) : /\.(ts|svelte)$/.test(name) ? [path] : [];
  });
}

/** `/api/agents/${id}/sessions?x` → `/api/agents/{}/sessions`. */
function normalise(path: string): string {
  return path.split('?')[0]!.replace(/\$\{[^}]*\}/g, '{}').replace(/\{[A-Za-z]+\}/g, '{}').replace(/\/$/, '');
}

describe('the dashboard calls only routes the gateway publishes', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(); });
  afterAll(async () => { await h?.close(); });

  it('every /api path in web/src is in /api/openapi.json', async () => {
    const doc = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as { paths: Record<string, unknown> };
    const published = new Set(Object.keys(doc.paths).map(normalise));
    const used = new Map<string, string>();
    // hooks.server.ts forwards /api as a prefix (split mode); it calls no route itself.
    for (const file of sourcesOf(join(repoRoot, 'web', 'src')).filter((f) => !f.endsWith('hooks.server.ts'))) {
      for (const [, path] of readFileSync(file, 'utf8').matchAll(/['`](\/api\/[^'`\s]*)['`]/g)) {
        if (path!.includes('...')) continue; // prose in comments
        used.set(normalise(path!), file.slice(repoRoot.length));
      }
    }
    expect(used.size).toBeGreaterThan(20);
    const unknown = [...used].filter(([path]) => !published.has(path)).map(([path, file]) => `${path} (${file})`);
    expect(unknown).toEqual([]);
  });
});
