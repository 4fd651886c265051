import { describe, expect, it } from 'vitest';
import type { AuditFilterMsg, ExportRequest, QueryRequest } from '@portcullis/core';
import {
  InvalidArgumentError, OVERVIEW_TOP_DEFAULT, OVERVIEW_TOP_MAX, parseExportRequest, parseFilter, parseHistogramRequest, parseInstant, parseOverviewRequest, parseQueryRequest,
  parsePolicyTriggersRequest, parseStatsRequest, POLICY_TRIGGERS_MAX_IDS,
} from './parse-request.ts';

const emptyFilter: AuditFilterMsg = { agentIds: ['a1'], from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '' };
const query = (over: Partial<QueryRequest> & { filter?: Partial<AuditFilterMsg> } = {}): QueryRequest =>
  ({ limit: 0, offset: 0, ...over, filter: { ...emptyFilter, ...over.filter } });

describe('parseInstant', () => {
  it.each([
    ['2026-10-01T12:34:56.789Z', 'from', '2026-10-01T12:34:56.789Z'],
    // `to` is inclusive at the precision written: that second, that minute (decision 003).
    ['2026-10-01T12:34:56Z', 'to', '2026-10-01T12:34:56.999Z'],
    ['2026-10-01T12:34Z', 'to', '2026-10-01T12:34:59.999Z'],
    ['2026-10-01T12:34:56.789Z', 'to', '2026-10-01T12:34:56.789Z'],
    ['2026-10-01T14:34:56.789+02:00', 'from', '2026-10-01T12:34:56.789Z'],
    ['2026-10-01T10:34:56.789-0200', 'from', '2026-10-01T12:34:56.789Z'],
    ['2026-10-01T12:34Z', 'from', '2026-10-01T12:34:00.000Z'],
    ['2026-10-01T12:34:56.7891234Z', 'from', '2026-10-01T12:34:56.789Z'],
    ['2026-10-01 12:34:56', 'from', '2026-10-01T12:34:56.000Z'],
    ['2026-10-01', 'from', '2026-10-01T00:00:00.000Z'],
    ['2026-10-01', 'to', '2026-10-01T23:59:59.999Z'],
    ['2024-02-29', 'to', '2024-02-29T23:59:59.999Z'],
    ['1000-01-01', 'from', '1900-01-01T00:00:00.000Z'],
    ['9999-12-31', 'to', '2299-12-31T23:59:59.999Z'],
  ] as const)('%s as %s → %s', (input, bound, expected) => {
    expect(parseInstant(input, 'filter.x', bound)?.toISOString()).toBe(expected);
  });

  it('treats an empty string as no bound', () => {
    expect(parseInstant('', 'filter.from', 'from')).toBeUndefined();
  });

  it.each(['yesterday', '2026-13-01', '2026-02-30', '2025-02-29', '2026-10-01T24:00:00Z', '2026-10-01T12:60Z', '2026-10-01T12:00:00+25:00',
    '2026-10-01T12:00:00Zjunk', "2026-10-01' OR 1=1 --", '1696161600000', '2026/10/01'])('rejects %j', (input) => {
    expect(() => parseInstant(input, 'filter.from', 'from')).toThrow(InvalidArgumentError);
    expect(() => parseInstant(input, 'filter.from', 'from')).toThrow(/filter\.from/);
  });
});

describe('parseFilter', () => {
  it('maps empty strings to absent filters', () => {
    expect(parseFilter(emptyFilter)).toEqual({ agentIds: ['a1'] });
  });

  it('treats a missing filter message as "no agents"', () => {
    expect(parseFilter(null)).toEqual({ agentIds: [] });
  });

  it('keeps every set filter', () => {
    const filter = parseFilter({ ...emptyFilter, from: '2026-10-01', to: '2026-10-02', agent: 'sup', service: 'github', tool: 'issue', result: 'DENY', member: 'm', policy: 'p', agentIdsByCurrentName: ['a1'] });
    expect(filter).toEqual({
      agentIds: ['a1'], from: new Date('2026-10-01T00:00:00.000Z'), to: new Date('2026-10-02T23:59:59.999Z'),
      agent: 'sup', agentIdsByCurrentName: ['a1'], service: 'github', tool: 'issue', result: 'DENY', member: 'm', policy: 'p',
    });
  });

  it.each([
    // Named as the REST query parameter the caller sent, not as the internal field (issue 15).
    [{ result: 'deny' }, /^result must be ALLOW or DENY/],
    [{ result: 'MAYBE' }, /^result/],
    [{ from: '2026-10-02', to: '2026-10-01' }, /^from \(2026-10-02\) is after to \(2026-10-01\)$/],
    [{ from: 'soon' }, /^from must be an ISO 8601/],
    [{ agentIds: [''] }, /filter\.agent_ids/],
    [{ tool: 'x'.repeat(513) }, /^tool must be at most 512/],
  ] as const)('rejects %j', (over, message) => {
    expect(() => parseFilter({ ...emptyFilter, ...over } as AuditFilterMsg)).toThrow(message);
  });
});

describe('parseQueryRequest', () => {
  it.each([
    [0, 500], [1, 1], [500, 500], [501, 500], [100_000, 500],
  ])('limit %i → %i', (limit, expected) => {
    expect(parseQueryRequest(query({ limit })).page.limit).toBe(expected);
  });

  it('collects the agents whose policy identities are hidden; a policy filter never matches their entries (decision 022)', () => {
    const hidden = { ...query({ filter: { ...emptyFilter, agentIds: ['a1', 'a2'] } }), redactPolicyAgentIds: ['a2'] };
    expect([...parseQueryRequest(hidden).redactPolicyAgentIds]).toEqual(['a2']);
    expect(parseQueryRequest(hidden).filter.agentIds).toEqual(['a1', 'a2']);
    const probing = { ...query({ filter: { ...emptyFilter, agentIds: ['a1', 'a2'], policy: 'p9' } }), redactPolicyAgentIds: ['a2'] };
    expect(parseQueryRequest(probing).filter).toEqual({ agentIds: ['a1'], policy: 'p9' });
    expect(parseQueryRequest(query({ filter: { ...emptyFilter, agentIds: ['a1'], policy: 'p9' } })).filter).toEqual({ agentIds: ['a1'], policy: 'p9' });
  });

  it('rejects a negative limit or offset', () => {
    expect(() => parseQueryRequest(query({ limit: -1 }))).toThrow(/limit must be a non-negative integer/);
    expect(() => parseQueryRequest(query({ offset: -5 }))).toThrow(/offset must be a non-negative integer/);
  });
});

describe('parseExportRequest', () => {
  const exportRequest = (over: Partial<ExportRequest> = {}): ExportRequest =>
    ({ filter: emptyFilter, limit: 0, offset: 0, format: '', redactPolicyAgentIds: [], ...over });

  it('defaults to CSV and every row', () => {
    const parsed = parseExportRequest(exportRequest());
    expect(parsed.format).toBe('csv');
    expect(parsed.page).toEqual({ limit: 0, offset: 0 });
  });

  it('does not clamp an explicit export limit', () => {
    expect(parseExportRequest(exportRequest({ limit: 5_000, format: 'ndjson' })).page.limit).toBe(5_000);
  });

  it('rejects an unknown format', () => {
    expect(() => parseExportRequest(exportRequest({ format: 'xlsx' }))).toThrow(/format must be csv or ndjson/);
  });

  it('collects the agents to redact; a policy filter never matches their entries', () => {
    expect([...parseExportRequest(exportRequest({ redactPolicyAgentIds: ['a1', 'a2'] })).redactPolicyAgentIds]).toEqual(['a1', 'a2']);
    const probing = exportRequest({ filter: { ...emptyFilter, agentIds: ['a1', 'a2'], policy: 'p9' }, redactPolicyAgentIds: ['a1'] });
    expect(parseExportRequest(probing).filter).toEqual({ agentIds: ['a2'], policy: 'p9' });
  });
});

describe('parseStatsRequest', () => {
  it('validates the range', () => {
    expect(parseStatsRequest({ agentIds: ['a1'], from: '2026-10-01', to: '' })).toEqual({ agentIds: ['a1'], from: new Date('2026-10-01T00:00:00.000Z'), to: undefined });
    expect(() => parseStatsRequest({ agentIds: ['a1'], from: 'nope', to: '' })).toThrow(InvalidArgumentError);
  });
});

describe('parsePolicyTriggersRequest', () => {
  it('takes one agent and de-duplicated policy ids', () => {
    expect(parsePolicyTriggersRequest({ agentId: 'a1', policyDbIds: ['p1', 'p2', 'p1'] })).toEqual({ agentId: 'a1', policyDbIds: ['p1', 'p2'] });
    expect(parsePolicyTriggersRequest({ agentId: 'a1', policyDbIds: [] })).toEqual({ agentId: 'a1', policyDbIds: [] });
  });

  it('refuses a missing agent, empty ids and too many ids', () => {
    expect(() => parsePolicyTriggersRequest({ agentId: '', policyDbIds: ['p1'] })).toThrow(InvalidArgumentError);
    expect(() => parsePolicyTriggersRequest({ agentId: 'a1', policyDbIds: [''] })).toThrow(InvalidArgumentError);
    expect(() => parsePolicyTriggersRequest({ agentId: 'a1', policyDbIds: Array.from({ length: POLICY_TRIGGERS_MAX_IDS + 1 }, (_, i) => `p${i}`) })).toThrow(/at most/);
  });
});

describe('parseHistogramRequest', () => {
  it('reads Query\'s filter, and a policy filter leaves out the agents whose policies are hidden, as Query does', () => {
    const filter = { ...emptyFilter, agentIds: ['a1', 'a2'], policy: 'p1' };
    expect(parseHistogramRequest({ filter, redactPolicyAgentIds: ['a2'] })).toEqual(parseQueryRequest({ filter, limit: 0, offset: 0, redactPolicyAgentIds: ['a2'] }).filter);
    expect(parseHistogramRequest({ filter, redactPolicyAgentIds: ['a2'] }).agentIds).toEqual(['a1']);
    expect(parseHistogramRequest({ filter: { ...filter, policy: '' }, redactPolicyAgentIds: ['a2'] }).agentIds).toEqual(['a1', 'a2']);
    expect(() => parseHistogramRequest({ filter: { ...emptyFilter, from: '2026-10-02', to: '2026-10-01' } })).toThrow(InvalidArgumentError);
  });
});

describe('parseOverviewRequest', () => {
  const overview = (over: Record<string, unknown> = {}) => parseOverviewRequest({ agentIds: ['a1', 'a2'], from: '', to: '', ...over });
  it('reads the agents and range like Stats, the agents whose policies it may name, and rows per list', () => {
    expect(overview({ redactPolicyAgentIds: ['a2'] })).toEqual({ agentIds: ['a1', 'a2'], from: undefined, to: undefined, policyAgentIds: ['a1'], top: OVERVIEW_TOP_DEFAULT });
    expect(overview({ top: 3, from: '2026-10-01' })).toMatchObject({ top: 3, from: new Date('2026-10-01T00:00:00.000Z'), policyAgentIds: ['a1', 'a2'] });
  });
  it.each([
    ['top above the maximum', { top: OVERVIEW_TOP_MAX + 1 }, /top/],
    ['a negative top', { top: -1 }, /top/],
    ['from after to', { from: '2026-10-02', to: '2026-10-01' }, /after/],
    ['a bad date', { to: 'soon' }, /to must be/],
    ['an empty redacted id', { redactPolicyAgentIds: [''] }, /redact_policy_agent_ids/],
  ])('refuses %s', (_label, over, message) => {
    expect(() => overview(over)).toThrow(message);
  });
});
