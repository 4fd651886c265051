import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { loadAuditConfig, startAuditService, type AuditService } from '@portcullis/audit';
import { createApiHarness, type ApiHarness } from '@portcullis/gateway/testing';
import { freePort } from './processes.ts';

/** The gateway's `/api` and a real audit service (chDB in a temp directory) behind it. */
export interface AuditApiHarness {
  h: ApiHarness;
  audit: AuditService;
  /** The member id of `email` on `agentId`. */
  memberIdOf(agentId: string, email: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * `createApiHarness` (real Postgres, in-process bus) with a real audit service over gRPC on
 * loopback sharing its bus: for tests of the audit and dashboard routes that write entries
 * straight into `audit.store` for agents made through the API.
 */
export async function startAuditApiHarness(label: string, env: Record<string, string> = {}): Promise<AuditApiHarness> {
  const auditPort = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), `pc-${label}-`));
  const h = await createApiHarness({ AUDIT_URL: `127.0.0.1:${auditPort}`, ...env });
  const audit = await startAuditService(loadAuditConfig({ NODE_ENV: 'test', DATA_DIR: dataDir, GRPC_ADDRESS: `127.0.0.1:${auditPort}` }), { bus: h.bus, log: () => undefined });
  return {
    h,
    audit,
    async memberIdOf(agentId, email) {
      const [row] = await h.db.select({ id: schema.members.id }).from(schema.members).where(and(eq(schema.members.agentId, agentId), eq(schema.members.email, email)));
      return row!.id;
    },
    async close() {
      await h.close();
      await audit.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
