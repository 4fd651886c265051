import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { openDatabase, type DatabaseHandle } from './database.ts';
import { agents, users } from './schema/index.ts';
import { createTestDatabase, type TestDatabase } from '../testing/postgres.ts';

async function roundTrip(handle: DatabaseHandle) {
  const [user] = await handle.db.insert(users).values({ email: `u${Date.now()}@example.com` }).returning();
  const [agent] = await handle.db.insert(agents).values({ name: 'a', tags: ['x'], allowedServices: ['github'], createdBy: user!.id }).returning();
  const [read] = await handle.db.select().from(agents).where(eq(agents.id, agent!.id));
  return read!;
}

describe('openDatabase', () => {
  let pgDb: TestDatabase;
  const dir = mkdtempSync(join(tmpdir(), 'pc-db-'));
  beforeAll(async () => { pgDb = await createTestDatabase('dbtest'); });
  afterAll(async () => { await pgDb.drop(); rmSync(dir, { recursive: true, force: true }); });

  it('applies the same migrations on Postgres 15 and PGlite and round-trips rows identically', async () => {
    const server = await openDatabase({ DATABASE_URL: pgDb.url, DATA_DIR: dir });
    const embedded = await openDatabase({ DATA_DIR: dir });
    try {
      const a = await roundTrip(server);
      const b = await roundTrip(embedded);
      expect(a.tags).toEqual(['x']);
      expect(b.tags).toEqual(['x']);
      expect(a.allowedServices).toEqual(b.allowedServices);
      expect(a.createdAt).toBeInstanceOf(Date);
      expect(b.createdAt).toBeInstanceOf(Date);
    } finally {
      await server.close();
      await embedded.close();
    }
  });

  it('migrates concurrently from several processes without failing', async () => {
    const handles = await Promise.all([1, 2, 3].map(() => openDatabase({ DATABASE_URL: pgDb.url, DATA_DIR: dir })));
    await Promise.all(handles.map((h) => h.close()));
  });
});
