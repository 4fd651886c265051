import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditQueryService, createMemoryBus, type Bus, type MemberStatsResponse } from '@portcullis/core';
import { loadAuditConfig } from '../config.ts';
import { startAuditService, type AuditService } from '../server.ts';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';

/** `MemberStats` over real gRPC, on a real store (chDB in a temp directory). */

const A1 = 'agent-ms-1', A2 = 'agent-ms-2', HIDDEN = 'agent-ms-hidden';
const MARIA = '0195f0a0-0000-7000-8000-0000000000a1';
const LI = '0195f0a0-0000-7000-8000-0000000000a2';
const SAM = '0195f0a0-0000-7000-8000-0000000000a3';

const entries = [
  makeEntry({ agentId: A1, memberId: MARIA, memberName: 'maria@old.example', timestamp: '2026-10-01T08:00:00.000Z', decision: 'ALLOW' }),
  makeEntry({ agentId: A1, memberId: MARIA, memberName: 'maria@example.com', timestamp: '2026-10-02T09:30:00.000Z', decision: 'DENY' }),
  makeEntry({ agentId: A2, memberId: MARIA, memberName: 'maria@example.com', timestamp: '2026-10-01T10:00:00.000Z', decision: 'ALLOW' }),
  makeEntry({ agentId: A1, memberId: LI, memberName: 'li@example.com', timestamp: '2026-10-01T12:00:00.000Z', decision: 'DENY' }),
  makeEntry({ agentId: A2, memberId: SAM, memberName: 'sam@example.com', timestamp: '2026-10-03T00:00:00.000Z', decision: 'ALLOW' }),
  makeEntry({ agentId: HIDDEN, memberId: LI, memberName: 'li@example.com', timestamp: '2026-10-01T12:00:00.000Z', decision: 'ALLOW' }),
];

const dir = makeTempDir('member-stats');
let bus: Bus;
let service: AuditService;
let client: grpc.Client & Record<string, (...args: any[]) => any>;

function memberStats(request: Record<string, unknown>): Promise<MemberStatsResponse> {
  return new Promise((resolve, reject) => {
    client.MemberStats!({ agentIds: [A1, A2], from: '', to: '', ...request }, (err: grpc.ServiceError | null, response: MemberStatsResponse) => (err ? reject(err) : resolve(response)));
  });
}

beforeAll(async () => {
  bus = createMemoryBus();
  service = await startAuditService(loadAuditConfig({ NODE_ENV: 'test', DATA_DIR: dir.path, GRPC_ADDRESS: '127.0.0.1:0' }), { bus, log: () => undefined });
  client = new AuditQueryService(service.address, grpc.credentials.createInsecure()) as typeof client;
  await service.store.insert(entries);
  // A redelivered batch: the same ids again must not count twice.
  await service.store.insert(entries.slice(0, 2));
});

afterAll(async () => {
  client?.close();
  await service?.close();
  await bus?.close();
  dir.remove();
});

describe('MemberStats over gRPC', () => {
  it('counts calls, allowed and denied per member over the given agents only, most calls first, newest name and last call', async () => {
    const { members } = await memberStats({});
    expect(members).toEqual([
      { memberId: MARIA, memberName: 'maria@example.com', calls: 3, allowed: 2, denied: 1, lastCallAt: '2026-10-02T09:30:00.000Z' },
      { memberId: LI, memberName: 'li@example.com', calls: 1, allowed: 0, denied: 1, lastCallAt: '2026-10-01T12:00:00.000Z' },
      { memberId: SAM, memberName: 'sam@example.com', calls: 1, allowed: 1, denied: 0, lastCallAt: '2026-10-03T00:00:00.000Z' },
    ]);
  });

  it('applies an inclusive range (a bare date is the whole UTC day) and narrows to the agents asked for', async () => {
    const { members } = await memberStats({ from: '2026-10-01', to: '2026-10-01' });
    expect(members.map((m) => [m.memberId, m.calls])).toEqual([[MARIA, 2], [LI, 1]]);
    expect((await memberStats({ agentIds: [A2] })).members.map((m) => m.memberId)).toEqual([MARIA, SAM]);
  });

  it('answers no members for no agents or an unknown agent, and treats an injection string as an id', async () => {
    expect((await memberStats({ agentIds: [] })).members).toEqual([]);
    expect((await memberStats({ agentIds: ["x' OR 1=1 --"] })).members).toEqual([]);
  });

  it('refuses a bad date, from after to, or an empty agent id with INVALID_ARGUMENT naming the field', async () => {
    for (const [request, message] of [
      [{ from: 'yesterday' }, /from must be an ISO 8601 date/],
      [{ to: '2026-02-30' }, /^to must be an ISO 8601 date or date-time that exists/],
      [{ from: '2026-10-02', to: '2026-10-01' }, /from .* is after to/],
      [{ agentIds: [''] }, /agent_ids/],
    ] as const) {
      const err = await memberStats(request).then(() => undefined, (e: grpc.ServiceError) => e);
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err?.details).toMatch(message);
    }
  });
});
