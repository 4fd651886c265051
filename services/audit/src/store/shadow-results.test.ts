import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '@portcullis/core';
import { parseShadowResultsRequest } from '../handlers/parse-request.ts';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';
import { openAuditStore, type AuditStore } from './audit-store.ts';

/** `ShadowResults` on chDB (decision 062): one shadow policy's would-be changes since it went into shadow. */
const dir = makeTempDir('shadow-results');
let store: AuditStore;

const AGENT = 'agent-shadow-results';
const POLICY = 'pol-shadow';
const SINCE = new Date('2026-10-02T00:00:00.000Z');

const entry = (at: string, over: Partial<AuditEntry>) => makeEntry({ agentId: AGENT, timestamp: at, ...over });
const shadow = (decision: 'ALLOW' | 'DENY', ids: string[]) => ({ shadowDecision: decision, shadowPolicyIds: ids.map((id) => `key-${id}`), shadowPolicyDbIds: ids });

const entries = [
  // Before the policy went into shadow: never counted.
  entry('2026-10-01T23:59:59.999Z', { decision: 'ALLOW', ...shadow('DENY', [POLICY]) }),
  // Would have denied two allowed calls.
  entry('2026-10-02T08:00:00.000Z', { decision: 'ALLOW', ...shadow('DENY', [POLICY]) }),
  entry('2026-10-03T09:00:00.000Z', { decision: 'ALLOW', ...shadow('DENY', [POLICY, 'pol-other']) }),
  // Matched but changed nothing (an enforced forbid denied the call already).
  entry('2026-10-03T10:00:00.000Z', { decision: 'DENY', ...shadow('DENY', [POLICY]) }),
  // Would have allowed a denied call (a shadow permit on a default-deny agent).
  entry('2026-10-03T11:00:00.000Z', { decision: 'DENY', ...shadow('ALLOW', [POLICY]) }),
  // Another shadow policy's change, and a call with a shadow verdict no shadow policy decided.
  entry('2026-10-03T12:00:00.000Z', { decision: 'ALLOW', ...shadow('DENY', ['pol-other']) }),
  entry('2026-10-03T13:00:00.000Z', { decision: 'ALLOW', ...shadow('ALLOW', []) }),
  // No shadow verdict at all (written before the agent had shadow policies), and another agent.
  entry('2026-10-03T14:00:00.000Z', { decision: 'ALLOW' }),
  makeEntry({ agentId: 'agent-else', timestamp: '2026-10-03T15:00:00.000Z', decision: 'ALLOW', ...shadow('DENY', [POLICY]) }),
];

beforeAll(async () => {
  store = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'portcullis' });
  await store.insert(entries);
});
afterAll(async () => {
  await store?.close();
  dir.remove();
});

describe('shadowResults', () => {
  it('counts the agent\'s entries since the policy went into shadow, what it decided and what it would have changed, newest samples first', async () => {
    const results = await store.shadowResults(AGENT, POLICY, SINCE, 10);
    expect(results).toMatchObject({ evaluated: 6, matched: 4, allowToDeny: 2, denyToAllow: 1, lastMatched: '2026-10-03T11:00:00.000Z' });
    expect(results.samples.map((s) => s.entryId)).toEqual([entries[4]!.id, entries[2]!.id, entries[1]!.id]);
    expect(results.samples[0]).toEqual({
      entryId: entries[4]!.id, timestamp: '2026-10-03T11:00:00.000Z', memberId: entries[4]!.memberId, memberName: 'maria@example.com',
      service: 'github', tool: 'create_issue', decision: 'DENY', shadowDecision: 'ALLOW',
    });
    // Samples carry no arguments.
    expect(JSON.stringify(results.samples)).not.toContain('It broke');
  });

  it('bounds the samples, and answers zeros for a policy never matched', async () => {
    expect((await store.shadowResults(AGENT, POLICY, SINCE, 1)).samples).toHaveLength(1);
    expect(await store.shadowResults(AGENT, 'pol-never', SINCE, 10)).toEqual({ evaluated: 6, matched: 0, allowToDeny: 0, denyToAllow: 0, samples: [], lastMatched: '' });
  });

  it('refuses malformed requests with a message naming the field', () => {
    const ok = { agentId: AGENT, policyDbId: POLICY, since: SINCE.toISOString(), sampleLimit: 0 };
    expect(parseShadowResultsRequest(ok)).toEqual({ agentId: AGENT, policyDbId: POLICY, since: SINCE, sampleLimit: 10 });
    for (const [bad, field] of [
      [{ ...ok, agentId: '' }, 'agent_id'], [{ ...ok, policyDbId: '' }, 'policy_db_id'], [{ ...ok, policyDbId: 'x'.repeat(500) }, 'policy_db_id'],
      [{ ...ok, since: 'yesterday' }, 'since'], [{ ...ok, since: '' }, 'since'], [{ ...ok, sampleLimit: 51 }, 'sample_limit'], [{ ...ok, sampleLimit: -1 }, 'sample_limit'],
    ] as const) {
      expect(() => parseShadowResultsRequest(bad), field).toThrow(field);
    }
  });
});
