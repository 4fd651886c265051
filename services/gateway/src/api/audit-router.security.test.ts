import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTORS, createApiHarness, signInRoleActors, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * The audit and dashboard routes (decision 014) as every actor, and their answers to bad
 * input, without an audit service: this harness points AUDIT_URL at a closed port. So every
 * signed-in caller who passes validation gets 503 `unavailable` — proof that access checks
 * and validation ran first and that an unreachable audit service is never a 500. What each
 * actor *sees* with a real audit service is in test/integration/audit-api.test.ts.
 */

const ROUTES = ['/api/audit', '/api/audit/export', '/api/audit/members', '/api/audit/histogram', '/api/dashboard/stats', '/api/dashboard/member-stats', '/api/dashboard/overview'];

let h: ApiHarness;
let roles: RoleActors;
let agentId: string;

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'auditsec');
  agentId = await roles.agentWithMembers({ name: 'Audited' });
});
afterAll(async () => { await h?.close(); });

type ErrorBody = { error: { code: string; message: string; requestId?: string; details?: { field?: string; in?: string } } };
const get = (url: string, cookie?: string) => h.request({ method: 'GET', url, ...(cookie ? { cookie } : {}) });

describe.each(ROUTES)('GET %s', (route) => {
  it.each(ACTORS)('as %s: 401 anonymous, otherwise 503 unavailable (the audit service is down), never 500', async (actor) => {
    const res = await get(route, roles.cookieOf[actor]);
    const expected = actor === 'anonymous' ? 401 : 503;
    expect(res.statusCode, res.body).toBe(expected);
    const body = res.json() as ErrorBody;
    expect(body.error.code).toBe(expected === 401 ? 'unauthenticated' : 'unavailable');
    expect(body.error.requestId).toBeTypeOf('string');
    expect(res.body).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|stack|at /);
  });

  it('answers anonymous callers 401 before looking at the parameters', async () => {
    const res = await get(`${route}?limit=abc&max=-1&from=never&bogus=1`);
    expect(res.statusCode).toBe(401);
  });
});

describe('bad query parameters → 400 invalid_request naming the field, never 500', () => {
  const cases: Array<[route: string, query: string, field: string, unknown?: 'unknown']> = [
    ['/api/audit/export', 'max=0', 'max'],
    ['/api/audit/export', 'max=501', 'max'],
    ['/api/audit/export', 'max=-5', 'max'],
    ['/api/audit/export', 'max=ten', 'max'],
    ['/api/audit/export', 'max=1.5', 'max'],
    ['/api/audit/export', 'offset=-1', 'offset'],
    ['/api/audit/export', 'offset=abc', 'offset'],
    ['/api/audit/export', 'exportAll=yes', 'exportAll'],
    ['/api/audit/export', 'exportAll=1', 'exportAll'],
    ['/api/audit/export', 'format=xlsx', 'format'],
    ['/api/audit/export', 'result=MAYBE', 'result'],
    ['/api/audit/export', "result=ALLOW' OR 1=1 --", 'result'],
    ['/api/audit/export', 'from=not-a-date', 'from'],
    ['/api/audit/export', 'to=31/12/2026', 'to'],
    ['/api/audit/export', 'limit=10', 'limit', 'unknown'],
    ['/api/audit/export', 'agent=a&agent=b', 'agent'],
    ['/api/audit/export', `tool=${'x'.repeat(201)}`, 'tool'],
    ['/api/audit/export', 'callerIp=1.2.3.4', 'callerIp', 'unknown'],
    ['/api/audit/members', 'agentId=x', 'agentId', 'unknown'],
    ['/api/audit', 'agentId=not-a-uuid', 'agentId'],
    ['/api/audit', "agentId=' OR 1=1 --", 'agentId'],
    ['/api/audit', 'agentId=a&agentId=b', 'agentId'],
    ['/api/audit/export', 'agentId=support-desk', 'agentId'],
    ['/api/audit/histogram', 'agentId=123', 'agentId'],
    ['/api/audit/stream', 'agentId=123', 'agentId'],
    ['/api/dashboard/stats', 'from=yesterday', 'from'],
    ['/api/dashboard/stats', 'agentId=x', 'agentId', 'unknown'],
    ['/api/dashboard/member-stats', 'to=soon', 'to'],
    ['/api/dashboard/member-stats', 'agentId=not-a-uuid', 'agentId'],
    ['/api/dashboard/member-stats', "agentId=' OR 1=1 --", 'agentId'],
    ['/api/dashboard/member-stats', 'limit=5', 'limit', 'unknown'],
    ['/api/dashboard/member-stats', 'from=2026-10-01&from=2026-10-02', 'from'],
    ['/api/audit/histogram', 'result=MAYBE', 'result'],
    ['/api/audit/histogram', 'from=not-a-date', 'from'],
    ['/api/audit/histogram', `tool=${'x'.repeat(201)}`, 'tool'],
    ['/api/audit/histogram', 'limit=10', 'limit', 'unknown'],
    ['/api/audit/histogram', 'offset=10', 'offset', 'unknown'],
    ['/api/dashboard/overview', 'from=yesterday', 'from'],
    ['/api/dashboard/overview', 'agentId=not-a-uuid', 'agentId'],
    ['/api/dashboard/overview', 'top=0', 'top'],
    ['/api/dashboard/overview', 'top=51', 'top'],
    ['/api/dashboard/overview', 'top=ten', 'top'],
    ['/api/dashboard/overview', 'agent=x', 'agent', 'unknown'],
    ['/api/dashboard/pending-approvals', 'agentId=nope', 'agentId'],
    ['/api/dashboard/pending-approvals', 'from=2026-10-01', 'from', 'unknown'],
  ];
  it.each(cases)('GET %s?%s', async (route, query, field, unknown) => {
    const res = await get(`${route}?${query}`, roles.cookieOf.owner);
    expect(res.statusCode, res.body).toBe(400);
    const body = res.json() as ErrorBody;
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.details?.in).toBe('querystring');
    // Unknown parameters are reported as a whole (`details.field` "querystring", see validation.ts) with their names in the message.
    if (unknown) expect(body.error.message).toContain(field);
    else expect(body.error.details?.field).toBe(field);
  });
});

describe('a range that ends before it starts (issue 15)', () => {
  it.each(['/api/audit', '/api/audit/export', '/api/audit/histogram', '/api/dashboard/stats', '/api/dashboard/member-stats', '/api/dashboard/overview'])('GET %s: 400 naming `from`, the parameter the caller sent', async (route) => {
    for (const query of ['from=2026-10-02&to=2026-10-01', 'from=2026-10-01T21:13Z&to=2026-10-01T21:12Z', 'from=2026-10-01T21:12:05.5Z&to=2026-10-01T21:12:05.4Z']) {
      const res = await get(`${route}?${query}`, roles.cookieOf.owner);
      expect(res.statusCode, `${query}: ${res.body}`).toBe(400);
      const body = res.json() as ErrorBody;
      expect(body.error).toMatchObject({ code: 'invalid_request', message: 'Invalid querystring field "from": must not be after "to"', details: { field: 'from', in: 'querystring' } });
      expect(res.body).not.toContain('filter.');
    }
  });

  it.each(['/api/audit', '/api/audit/export'])('GET %s: a value Date.parse takes but ISO 8601 does not is refused at the gateway, naming it', async (route) => {
    const res = await get(`${route}?from=${encodeURIComponent('2026-10-01T10:00:00 GMT')}`, roles.cookieOf.owner);
    expect(res.statusCode, res.body).toBe(400);
    expect((res.json() as ErrorBody).error.details).toMatchObject({ field: 'from', in: 'querystring' });
  });

  it.each(['/api/audit', '/api/audit/export', '/api/dashboard/stats'])('GET %s: from = to at minute precision is one whole minute, a valid range (then 503: no audit service)', async (route) => {
    const res = await get(`${route}?from=2026-10-01T21:12Z&to=2026-10-01T21:12Z`, roles.cookieOf.owner);
    expect(res.statusCode, res.body).toBe(503);
  });
});

describe.each(['/api/dashboard/member-stats', '/api/dashboard/overview'])('%s for one agent', (route) => {
  it('answers 404 for an agent the caller cannot see, the same as for one that does not exist', async () => {
    for (const actor of ['outsider', 'pending', 'rejected'] as const) {
      const res = await get(`${route}?agentId=${agentId}`, roles.cookieOf[actor]);
      expect(res.statusCode, `${actor}: ${res.body}`).toBe(404);
      expect((res.json() as ErrorBody).error).toMatchObject({ code: 'not_found', message: 'Agent not found.' });
    }
    const ghost = await get(`${route}?agentId=${randomUUID()}`, roles.cookieOf.owner);
    expect(ghost.statusCode).toBe(404);
    expect((ghost.json() as ErrorBody).error).toMatchObject({ code: 'not_found', message: 'Agent not found.' });
  });

  it('passes the access check for the owner and an approved member (then the audit service is down: 503)', async () => {
    for (const actor of ['owner', 'member'] as const) {
      expect((await get(`${route}?agentId=${agentId}`, roles.cookieOf[actor])).statusCode).toBe(503);
    }
  });
});

describe('GET /api/dashboard/pending-approvals (Postgres only: answers without the audit service)', () => {
  it.each(ACTORS)('as %s: the pending requests of the agents the caller owns', async (actor) => {
    const res = await get('/api/dashboard/pending-approvals', roles.cookieOf[actor]);
    if (actor === 'anonymous') return expect(res.statusCode).toBe(401);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as { total: number; members: Array<Record<string, unknown>> };
    if (actor !== 'owner') return expect(body).toEqual({ total: 0, members: [] });
    expect(body.total).toBe(1);
    expect(body.members).toEqual([{ agentId, agentName: 'Audited', memberId: expect.any(String), email: roles.email.pending, requestedAt: expect.any(String) }]);
    expect((await get(`/api/dashboard/pending-approvals?agentId=${randomUUID()}`, roles.cookieOf[actor])).json()).toEqual({ total: 0, members: [] });
  });
});

describe('OpenAPI', () => {
  it('documents the audit and dashboard routes with their query parameters', async () => {
    const doc = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { tags?: string[]; parameters?: Array<{ name: string; in: string }> }>>;
    };
    const params = (path: string) => doc.paths[path]?.get?.parameters?.map((p) => p.name).sort();
    expect(doc.paths['/api/audit/export']?.get?.tags).toEqual(['audit']);
    expect(params('/api/audit')).toEqual(['agent', 'agentId', 'from', 'limit', 'member', 'offset', 'policy', 'result', 'service', 'to', 'tool']);
    expect(params('/api/audit/export')).toEqual(['agent', 'agentId', 'exportAll', 'format', 'from', 'max', 'member', 'offset', 'policy', 'result', 'service', 'to', 'tool']);
    expect(doc.paths['/api/audit/members']?.get?.tags).toEqual(['audit']);
    expect(doc.paths['/api/dashboard/stats']?.get?.tags).toEqual(['dashboard']);
    expect(params('/api/dashboard/stats')).toEqual(['from', 'to']);
    expect(params('/api/dashboard/member-stats')).toEqual(['agentId', 'from', 'to']);
    expect(params('/api/audit/histogram')).toEqual(['agent', 'agentId', 'from', 'member', 'policy', 'result', 'service', 'to', 'tool']);
    expect(params('/api/dashboard/overview')).toEqual(['agentId', 'from', 'to', 'top']);
    expect(params('/api/dashboard/pending-approvals')).toEqual(['agentId']);
    // The responses are described too: the dashboard generates its types from this document.
    const full = doc as unknown as { paths: Record<string, { get: { responses: Record<string, { content?: Record<string, { schema?: { properties?: Record<string, unknown> } }> }> } }> };
    const props = (path: string) => Object.keys(full.paths[path]!.get.responses['200']?.content?.['application/json']?.schema?.properties ?? {}).sort();
    expect(props('/api/audit/histogram')).toEqual(['bucketSeconds', 'buckets']);
    expect(props('/api/dashboard/overview')).toEqual(['agentsWithErrors', 'memberDenyRates', 'pendingApprovals', 'series', 'topDeniedPolicies', 'topDeniedTools', 'totals']);
    expect(props('/api/dashboard/pending-approvals')).toEqual(['members', 'total']);
    // Decision 045: the audit, counter and tool-session answers are described too, every field the routes return.
    expect(props('/api/audit')).toEqual(['entries', 'total']);
    const entry = (full.paths['/api/audit']!.get.responses['200']!.content!['application/json']!.schema!.properties!.entries as { items: { properties: Record<string, unknown>; required: string[] } }).items;
    expect(Object.keys(entry.properties).sort()).toEqual([
      'action', 'agentId', 'agentName', 'approvalEvent', 'approvalId', 'approverId', 'approverName', 'callerIp', 'decision', 'durationMs', 'id', 'matchedPolicyIds', 'matchedPolicyNames', 'memberId', 'memberKeyId',
      'memberName', 'oauthClientId', 'policyDbIds', 'policyVersionIds', 'principal', 'reason', 'resource', 'service', 'sessionId', 'shadowDecision', 'shadowPolicyIds',
      'timestamp', 'tool', 'toolArgs', 'user',
    ]);
    expect(entry.required).not.toContain('shadowDecision');
    expect(entry.required).not.toContain('sessionId');
    expect(entry.required).not.toContain('oauthClientId');
    expect(props('/api/audit/members')).toEqual(['members']);
    expect(props('/api/dashboard/stats')).toEqual(['agents', 'allowed', 'calls', 'denied', 'policies']);
    expect(props('/api/dashboard/member-stats')).toEqual(['members']);
    expect(props('/api/agents/{id}/sessions')).toEqual(['sessions', 'total']);
    expect(props('/api/agents/{id}/my-sessions')).toEqual(['sessions', 'total']);
    expect(props('/api/agents/{id}/sessions/{sessionId}/activity')).toEqual(['allowed', 'calls', 'denied', 'firstCallAt', 'lastCallAt', 'policies', 'session', 'tools']);
  });
});
