import { describe, expect, it } from 'vitest';
import { whereOf } from './audit-filter.ts';

describe('whereOf', () => {
  it('always scopes by agent', () => {
    expect(whereOf({ agentIds: ['a1'] })).toEqual({ sql: 'agent_id IN {agentIds:Array(String)}', params: { agentIds: ['a1'] } });
  });

  it('binds every value and never splices it into the SQL', () => {
    const hostile = "x' OR 1=1; DROP TABLE audit_entries; --";
    const where = whereOf({
      agentIds: [hostile], from: new Date('2026-10-01T00:00:00Z'), to: new Date('2026-10-02T00:00:00Z'),
      service: hostile, tools: [hostile], result: 'DENY', member: hostile, policy: hostile,
    });
    expect(where.sql).not.toContain(hostile);
    expect(where.sql).not.toContain('2026');
    expect(where.sql).toMatch(/\{from:DateTime64\(3, 'UTC'\)\}/);
    expect(where.params).toEqual({
      agentIds: [hostile], from: '2026-10-01 00:00:00.000', to: '2026-10-02 00:00:00.000',
      service: hostile, tools: [hostile], result: 'DENY', member: hostile, policy: hostile,
    });
  });
});
