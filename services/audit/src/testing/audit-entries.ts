import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uuidv7 } from 'uuidv7';
import type { AuditEntry } from '@portcullis/core';

/** A complete, valid audit entry; `overrides` replace any field. */
export function makeEntry(overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: uuidv7(),
    timestamp: '2026-10-01T12:00:00.000Z',
    agentId: '0195f0a0-0000-7000-8000-00000000a001',
    agentName: 'Support Assistant',
    memberId: '0195f0a0-0000-7000-8000-00000000b001',
    memberName: 'maria@example.com',
    memberKeyId: '0195f0a0-0000-7000-8000-00000000c001',
    sessionId: 'session-1',
    service: 'github',
    tool: 'create_issue',
    action: 'GithubMCP::Action::"create_issue"',
    resource: 'GithubMCP::Repository::"acme/api"',
    callerIp: '203.0.113.7',
    toolArgs: { title: 'Bug', body: 'It broke' },
    decision: 'ALLOW',
    reason: 'No forbid policy matched',
    matchedPolicyIds: [],
    matchedPolicyNames: [],
    policyVersionIds: [],
    policyDbIds: [],
    durationMs: 12.5,
    principal: 'Portcullis::Member::"0195f0a0-0000-7000-8000-00000000b001"',
    ...overrides,
  };
}

/** A fresh directory for one test file's chDB data (chDB allows one per process). */
export function makeTempDir(label: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `portcullis-audit-${label}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
