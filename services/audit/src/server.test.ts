import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuditQueryService, createMemoryBus,
  type AuditEntry, type AuditFilterMsg, type Bus, type ExportChunk, type ExportRequest, type MembersResponse, type QueryRequest,
  type QueryResponse, type StatsResponse,
} from '@portcullis/core';
import { loadAuditConfig } from './config.ts';
import { CSV_HEADER } from './handlers/export-format.ts';
import { toAuditEntryMsg } from '@portcullis/core';
import { startAuditService, type AuditService } from './server.ts';
import { openAuditStore } from './store/audit-store.ts';
import { makeEntry, makeTempDir } from './testing/audit-entries.ts';
import { parseCsv } from './testing/parse-csv.ts';

const SUPPORT = 'agent-support', TRUSTED = 'agent-trusted', BULK = 'agent-bulk';
const dir = makeTempDir('server');
const config = loadAuditConfig({ NODE_ENV: 'test', DATA_DIR: dir.path, GRPC_ADDRESS: '127.0.0.1:0', AUDIT_BATCH_MAX_WAIT_MS: '20' });

const tricky = makeEntry({
  agentId: SUPPORT, agentName: 'Support, "EU"', memberName: 'Maria "M" García', timestamp: '2026-10-01T10:00:00.000Z',
  tool: 'delete_repo', service: 'github', resource: 'GithubMCP::Repository::"acme/api"', decision: 'DENY',
  reason: 'Blocked after hours,\nask an owner', durationMs: 41.5, matchedPolicyIds: ['night-forbid', 'repo-guard'],
  matchedPolicyNames: ['Night forbid', 'Repo guard'], policyDbIds: ['pol-1', 'pol-2'], policyVersionIds: ['ver-1', 'ver-2'],
  callerIp: '198.51.100.77',
});
const plain = makeEntry({ agentId: SUPPORT, agentName: 'Support, "EU"', timestamp: '2026-10-01T11:00:00.000Z', callerIp: '198.51.100.77' });
const trusted = makeEntry({
  agentId: TRUSTED, agentName: 'Trusted Bot', timestamp: '2026-10-01T12:00:00.000Z', decision: 'DENY', reason: 'No',
  matchedPolicyIds: ['secret-policy'], matchedPolicyNames: ['Secret policy'], policyDbIds: ['pol-9'], policyVersionIds: ['ver-9'],
  memberId: 'member-t', memberName: 'tom@example.com', callerIp: '198.51.100.77',
});
const bulk = Array.from({ length: 520 }, (_, i) =>
  makeEntry({ agentId: BULK, agentName: 'Bulk', timestamp: new Date(Date.UTC(2026, 9, 5) + i * 1_000).toISOString() }));

let bus: Bus;
let service: AuditService;
let client: grpc.Client & Record<string, (...args: any[]) => any>;

const filter = (over: Partial<AuditFilterMsg> = {}): AuditFilterMsg =>
  ({ agentIds: [SUPPORT, TRUSTED], from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '', ...over });

function unary<Res>(method: string, request: unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    client[method]!(request, (err: grpc.ServiceError | null, response: Res) => (err ? reject(err) : resolve(response)));
  });
}
const query = (request: Partial<QueryRequest>) => unary<QueryResponse>('Query', { filter: filter(), limit: 0, offset: 0, ...request });

function exportAll(request: Partial<ExportRequest>): Promise<{ text: string; chunks: number }> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const call = client.Export!({ filter: filter(), limit: 0, offset: 0, format: 'csv', redactPolicyAgentIds: [], ...request });
    call.on('data', (chunk: ExportChunk) => parts.push(chunk.data));
    call.on('error', reject);
    call.on('end', () => resolve({ text: Buffer.concat(parts).toString('utf8'), chunks: parts.length }));
  });
}

async function until(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  bus = createMemoryBus();
  service = await startAuditService(config, { bus });
  client = new AuditQueryService(service.address, grpc.credentials.createInsecure()) as typeof client;
  for (const entry of [tricky, plain, trusted]) await bus.publishAudit(entry);
  await service.store.insert(bulk);
  await until(async () => (await service.store.query({ agentIds: [SUPPORT, TRUSTED] }, { limit: 10, offset: 0 })).total === 3);
});

afterAll(async () => {
  client?.close();
  await service?.close();
  await bus?.close();
  dir.remove();
});

describe('startAuditService', () => {
  it('binds a real port when asked for port 0', () => {
    expect(service.address).toMatch(/^127\.0\.0\.1:[1-9]\d*$/);
  });
});

describe('Query over gRPC', () => {
  it('returns entries newest first with every field, and the total', async () => {
    const response = await query({});
    expect(response.total).toBe(3);
    expect(response.entries).toEqual([trusted, plain, tricky].map(toAuditEntryMsg));
  });

  it('clamps limit to 500 and defaults 0 to 500', async () => {
    const big = await query({ filter: filter({ agentIds: [BULK] }), limit: 1_000 });
    expect(big.entries).toHaveLength(500);
    expect(big.total).toBe(520);
    expect((await query({ filter: filter({ agentIds: [BULK] }), limit: 0 })).entries).toHaveLength(500);
    const tail = await query({ filter: filter({ agentIds: [BULK] }), limit: 500, offset: 510 });
    expect(tail.entries.map((e) => e.id)).toEqual(bulk.slice(0, 10).map((e) => e.id).reverse());
  });

  it('applies the spec filters (member id exact, e-mail matches nothing, policy id, policy key)', async () => {
    expect((await query({ filter: filter({ member: 'member-t' }) })).entries.map((e) => e.id)).toEqual([trusted.id]);
    expect((await query({ filter: filter({ member: 'tom@example.com' }) })).total).toBe(0);
    expect((await query({ filter: filter({ policy: 'pol-2' }) })).entries.map((e) => e.id)).toEqual([tricky.id]);
    expect((await query({ filter: filter({ policy: 'repo-guard' }) })).total).toBe(0);
    expect((await query({ filter: filter({ agentIds: [] }) })).total).toBe(0);
  });

  it('shows an entry written twice once', async () => {
    await service.store.insert([tricky, plain]);
    const response = await query({});
    expect(response.total).toBe(3);
    expect(response.entries.map((e) => e.id)).toEqual([trusted.id, plain.id, tricky.id]);
  });
});

describe('redact_policy_agent_ids on Query, and redact_policy_identities on SessionActivity (decision 022)', () => {
  it('answers a redacted agent\'s entries without policy identities, and lets no policy filter match them', async () => {
    const redacted = await query({ redactPolicyAgentIds: [TRUSTED] });
    expect(redacted.entries).toEqual([{ ...toAuditEntryMsg(trusted), matchedPolicyIds: [], matchedPolicyNames: [], matchedPolicyDbIds: [], policyVersionIds: [] }, ...[plain, tricky].map(toAuditEntryMsg)]);
    expect((await query({ filter: filter({ policy: 'pol-9' }) })).total).toBe(1);
    expect(await query({ filter: filter({ policy: 'pol-9' }), redactPolicyAgentIds: [TRUSTED] })).toEqual({ entries: [], total: 0 });
    expect((await query({ filter: filter({ policy: 'pol-2' }), redactPolicyAgentIds: [TRUSTED] })).entries.map((e) => e.id)).toEqual([tricky.id]);
  });

  it('leaves the per-policy hits out of a session\'s activity when asked to', async () => {
    const full = await unary<{ calls: number; policies: Array<{ policyDbId: string; policyKey: string }> }>('SessionActivity', { agentId: TRUSTED, sessionId: 'session-1' });
    expect(full.calls).toBe(1);
    expect(full.policies).toMatchObject([{ policyDbId: 'pol-9', policyKey: 'secret-policy' }]);
    const hidden = await unary<{ calls: number; denied: number; policies: unknown[] }>('SessionActivity', { agentId: TRUSTED, sessionId: 'session-1', redactPolicyIdentities: true });
    expect(hidden).toMatchObject({ calls: 1, denied: 1, policies: [] });
  });

  it('counts only tool calls in a session\'s activity, as every call counter does (protocol requests are audited apart)', async () => {
    const agentId = 'agent-protocol';
    await service.store.insert([
      makeEntry({ agentId, sessionId: 'session-p', decision: 'DENY', timestamp: '2026-10-02T10:00:00.000Z' }),
      // A protocol request (decision 071), and one as decision 025 wrote it (service `mcp`).
      makeEntry({ agentId, sessionId: 'session-p', decision: 'DENY', service: '', tool: 'tools/list', action: 'Portcullis::Action::"tools/list"', timestamp: '2026-10-02T10:00:01.000Z' }),
      makeEntry({ agentId, sessionId: 'session-p', decision: 'DENY', service: 'mcp', tool: 'ping', action: 'Portcullis::Action::"ping"', timestamp: '2026-10-02T10:00:02.000Z' }),
    ]);
    const activity = await unary<{ calls: number; denied: number; tools: Array<{ service: string; tool: string }> }>('SessionActivity', { agentId, sessionId: 'session-p' });
    expect(activity).toMatchObject({ calls: 1, denied: 1 });
    expect(activity.tools.map((t) => t.tool)).toEqual(['create_issue']);
  });
});

describe('Export over gRPC', () => {
  it('streams CSV: the spec header, RFC 4180 quoting, no callerIp, policy ids redacted for listed agents', async () => {
    const { text } = await exportAll({ redactPolicyAgentIds: [TRUSTED] });
    expect(text.startsWith(CSV_HEADER)).toBe(true);
    expect(CSV_HEADER).toBe('timestamp,agent,member,tool,service,resource,decision,reason,duration,matched_policy_ids\r\n');
    expect(text).not.toContain('198.51.100.77');
    expect(text).toContain(
      '2026-10-01T10:00:00.000Z,"Support, ""EU""","Maria ""M"" García",delete_repo,github,"GithubMCP::Repository::""acme/api""",DENY,"Blocked after hours,\nask an owner",41.5,night-forbid;repo-guard\r\n',
    );
    expect(text).toContain('2026-10-01T12:00:00.000Z,Trusted Bot,tom@example.com,create_issue,github,"GithubMCP::Repository::""acme/api""",DENY,No,12.5,\r\n');
    expect(text).not.toContain('secret-policy');
    expect(parseCsv(text)).toEqual([
      ['timestamp', 'agent', 'member', 'tool', 'service', 'resource', 'decision', 'reason', 'duration', 'matched_policy_ids'],
      // Newest first, as the list (decision 071).
      [trusted.timestamp, 'Trusted Bot', 'tom@example.com', 'create_issue', 'github', trusted.resource, 'DENY', 'No', '12.5', ''],
      [plain.timestamp, 'Support, "EU"', plain.memberName, plain.tool, plain.service, plain.resource, 'ALLOW', plain.reason, '12.5', ''],
      [tricky.timestamp, 'Support, "EU"', 'Maria "M" García', 'delete_repo', 'github', 'GithubMCP::Repository::"acme/api"', 'DENY', 'Blocked after hours,\nask an owner', '41.5', 'night-forbid;repo-guard'],
    ]);
  });

  it('does not redact agents that are not listed', async () => {
    const { text } = await exportAll({ redactPolicyAgentIds: [SUPPORT] });
    expect(text).toContain(',secret-policy\r\n');
    expect(text).not.toContain('night-forbid');
  });

  it('shows an entry written twice once', async () => {
    await service.store.insert([trusted, tricky]);
    const { text } = await exportAll({ format: 'ndjson' });
    const ids = text.trim().split('\n').map((line) => (JSON.parse(line) as AuditEntry).id);
    expect(ids.sort()).toEqual([tricky.id, plain.id, trusted.id].sort());
  });

  it('streams NDJSON entries with policy identities emptied for listed agents', async () => {
    const { text } = await exportAll({ format: 'ndjson', redactPolicyAgentIds: [TRUSTED] });
    const entries = text.trim().split('\n').map((line) => JSON.parse(line) as AuditEntry);
    expect(entries).toEqual([
      { ...trusted, matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [] },
      plain,
      tricky,
    ]);
  });

  it('limit 0 exports every match; limit and offset page', async () => {
    const all = await exportAll({ filter: filter({ agentIds: [BULK] }) });
    // (Chunking at scale, many ≤ 512 kB messages, is export-scale.test.ts's.)
    const newestFirst = [...bulk].reverse();
    expect(parseCsv(all.text).slice(1).map((row) => row[0])).toEqual(newestFirst.map((e) => e.timestamp));
    const page = await exportAll({ filter: filter({ agentIds: [BULK] }), limit: 2, offset: 1 });
    expect(parseCsv(page.text).slice(1).map((row) => row[0])).toEqual(newestFirst.slice(1, 3).map((e) => e.timestamp));
  });

  it('stops cleanly when the client cancels mid-export', async () => {
    await new Promise<void>((resolve, reject) => {
      const call = client.Export!({ filter: filter({ agentIds: [BULK] }), limit: 0, offset: 0, format: 'ndjson', redactPolicyAgentIds: [] });
      call.once('data', () => call.cancel());
      call.on('error', (err: grpc.ServiceError) => (err.code === grpc.status.CANCELLED ? resolve() : reject(err)));
      call.on('end', () => reject(new Error('the export ended instead of being cancelled')));
    });
    expect((await query({ filter: filter({ agentIds: [BULK] }) })).total).toBe(520);
    expect(parseCsv((await exportAll({ filter: filter({ agentIds: [BULK] }) })).text)).toHaveLength(1 + 520);
  });

  it('exports only the header when the caller sees no agents', async () => {
    expect((await exportAll({ filter: filter({ agentIds: [] }) })).text).toBe(CSV_HEADER);
  });
});

describe('Members and Stats over gRPC', () => {
  it('lists each member of the given agents once, under their most recent name', async () => {
    // `tricky` and `plain` share a member id; `plain` is newer, so its name wins.
    const response = await unary<MembersResponse>('Members', { agentIds: [SUPPORT, TRUSTED] });
    expect(response.members).toEqual([
      { memberId: plain.memberId, memberName: 'maria@example.com' },
      { memberId: 'member-t', memberName: 'tom@example.com' },
    ]);
    expect((await unary<MembersResponse>('Members', { agentIds: [] })).members).toEqual([]);
  });

  it('counts calls in a time range', async () => {
    expect(await unary<StatsResponse>('Stats', { agentIds: [SUPPORT, TRUSTED], from: '', to: '' })).toEqual({ calls: 3, allowed: 1, denied: 2 });
    expect(await unary<StatsResponse>('Stats', { agentIds: [SUPPORT, TRUSTED], from: '2026-10-01T10:30:00Z', to: '2026-10-01' })).toEqual({ calls: 2, allowed: 1, denied: 1 });
  });
});

describe('invalid input → INVALID_ARGUMENT', () => {
  const invalid = async (call: Promise<unknown>, message: RegExp) => {
    const err = await call.then(() => undefined, (e: grpc.ServiceError) => e);
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toMatch(message);
  };

  it.each<[string, Partial<QueryRequest>, RegExp]>([
    // Filters are named as the REST query parameters they carry (the gateway passes the message on).
    ['a from that is not a date', { filter: filter({ from: 'last tuesday' }) }, /^from must be an ISO 8601 date/],
    ['an impossible date', { filter: filter({ to: '2026-02-30' }) }, /^to must be an ISO 8601 date or date-time that exists/],
    ['from after to', { filter: filter({ from: '2026-10-02', to: '2026-10-01' }) }, /^from \(2026-10-02\) is after to \(2026-10-01\)$/],
    ['a lower-case result', { filter: filter({ result: 'deny' }) }, /^result must be ALLOW or DENY/],
    ['an unknown result', { filter: filter({ result: "ALLOW' OR '1'='1" }) }, /^result must be ALLOW or DENY/],
    ['a negative limit', { limit: -1 }, /limit must be a non-negative integer/],
    ['a negative offset', { offset: -10 }, /offset must be a non-negative integer/],
  ])('Query with %s', async (_label, request, message) => {
    await invalid(query(request), message);
  });

  it('Export with an unknown format or a bad date', async () => {
    await invalid(exportAll({ format: 'xlsx' }), /format must be csv or ndjson/);
    await invalid(exportAll({ filter: filter({ from: '2026-10-01T25:00:00Z' }) }), /^from must be/);
  });

  it('Stats with a bad date', async () => {
    await invalid(unary('Stats', { agentIds: [SUPPORT], from: 'soon', to: '' }), /from must be an ISO 8601 date/);
  });

  it('Members with an empty agent id', async () => {
    await invalid(unary('Members', { agentIds: [''] }), /agent_ids/);
  });
});

describe('close()', () => {
  it('writes every entry the bus accepted before it resolves', async () => {
    const agentId = 'agent-closing';
    const late = Array.from({ length: 200 }, (_, i) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 9) + i).toISOString() }));
    for (const entry of late) await bus.publishAudit(entry);
    await service.close();
    const reopened = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: config.CLICKHOUSE_DATABASE });
    try {
      expect((await reopened.query({ agentIds: [agentId] }, { limit: 500, offset: 0 })).total).toBe(200);
    } finally {
      await reopened.close();
    }
  });
});
