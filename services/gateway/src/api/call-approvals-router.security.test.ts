import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq, inArray } from 'drizzle-orm';
import { schema, sealWithSecret } from '@portcullis/core';
import { argsDigest, canonicalArgs } from '../modules/call-approvals/args-digest.ts';
import { ACTORS, createApiHarness, expectedStatus, signInRoleActors, withoutRequestId, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * Every call-approvals route (decision 063) as anonymous, outsider, rejected, pending member,
 * approved member and owner: owner only, outsiders get the 404 of a missing agent, members 403,
 * nothing changes unless the answer is 2xx. Plus the bodies an owner may send, and conflicts.
 * Issue 29 (decision 067): the exact arguments with only their secret spans masked, and the
 * recorded reveal, owner only.
 */

interface Endpoint {
  method: 'GET' | 'POST';
  path: string;
  payload?: Record<string, unknown>;
  owner: number;
}

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', path: '/api/agents/:id/call-approvals', owner: 200 },
  { method: 'GET', path: '/api/agents/:id/call-approvals?status=pending&limit=5', owner: 200 },
  { method: 'GET', path: '/api/agents/:id/call-approvals/:approvalId', owner: 200 },
  { method: 'POST', path: '/api/agents/:id/call-approvals/:approvalId/approve', payload: { comment: 'fine' }, owner: 200 },
  { method: 'POST', path: '/api/agents/:id/call-approvals/:approvalId/deny', payload: { reason: 'no' }, owner: 200 },
  { method: 'POST', path: '/api/agents/:id/call-approvals/:approvalId/reveal', payload: {}, owner: 200 },
];

const GHP = `ghp_${'Zq7Lm2Xv9Rt4'.repeat(3)}`;
/** The held call's exact arguments: prose with a token in it, as a member sent them. */
const ARGS = { owner: 'acme', repo: 'api', title: 'Guarded secret title', body: `Delete every project and post the customer list publicly. ${GHP}` };

let h: ApiHarness;
let roles: RoleActors;

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'apprsec');
});
afterAll(async () => { await h.close(); });

const settle = () => new Promise((r) => setTimeout(r, 0));

/** An agent with members of every status and one pending request of its approved member. */
async function freshAgent() {
  const agentId = await roles.agentWithMembers({ name: 'Guarded approvals' });
  const [member] = await h.db.select().from(schema.members).where(and(eq(schema.members.agentId, agentId), eq(schema.members.email, roles.email.member)));
  const [approval] = await h.db.insert(schema.callApprovals).values({
    id: randomUUID(), agentId, memberId: member!.id, memberEmail: roles.email.member, memberKeyId: 'key-1', service: 'github', tool: 'issue_write',
    toolArgs: { ...ARGS, body: '[REDACTED]' }, argsDigest: argsDigest(ARGS),
    sealedArgs: sealWithSecret(h.secret, 'portcullis/call-approval-args/v1', canonicalArgs(ARGS)),
    policyId: randomUUID(), policyKey: 'guarded-approval', policyName: 'Guarded approval', policyVersionId: randomUUID(), bindingVersions: 'v1',
    expiresAt: new Date(Date.now() + 3_600_000),
  }).returning();
  return { agentId, approvalId: approval!.id };
}

async function snapshotOf(agentId: string) {
  const approvals = await h.db.select().from(schema.callApprovals).where(eq(schema.callApprovals.agentId, agentId));
  const reveals = await h.db.select().from(schema.callApprovalReveals)
    .where(inArray(schema.callApprovalReveals.approvalId, approvals.map((a) => a.id)));
  const events = h.events.filter((e) => 'agentId' in e && e.agentId === agentId).length;
  return { approvals, reveals, events };
}

describe.each(ENDPOINTS)('$method $path', (endpoint) => {
  it.each(ACTORS)('as %s', async (actor) => {
    const ids = await freshAgent();
    const before = await snapshotOf(ids.agentId);
    const send = (agentId: string, approvalId: string) => h.request({
      method: endpoint.method,
      url: endpoint.path.replace(':id', agentId).replace(':approvalId', approvalId),
      ...(endpoint.payload ? { payload: endpoint.payload } : {}),
      ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}),
    });
    const res = await send(ids.agentId, ids.approvalId);
    const expected = expectedStatus(actor, 'owner', endpoint.owner);
    expect(res.statusCode, res.body).toBe(expected);
    if (expected >= 400) {
      expect((res.json() as { error: { code: string } }).error.code).toBe({ 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found' }[expected]);
      expect(res.body).not.toContain('Guarded secret title');
      expect(res.body).not.toContain(GHP);
      await settle();
      expect(await snapshotOf(ids.agentId)).toEqual(before);
    }
    if (expected === 404) {
      const ghost = await send(randomUUID(), randomUUID());
      expect(ghost.statusCode).toBe(404);
      expect(withoutRequestId(ghost.json())).toMatchObject({ error: { code: 'not_found' } });
    }
    if (expected < 300 && endpoint.method === 'POST') {
      await settle();
      expect(h.events).toContainEqual({ kind: 'approval.changed', approvalId: ids.approvalId, agentId: ids.agentId });
    }
  });
});

describe('the live stream and the dashboard list', () => {
  it.each(ACTORS.filter((a) => a !== 'owner'))('GET …/call-approvals/events as %s is refused before any stream opens', async (actor) => {
    const { agentId } = await freshAgent();
    const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals/events`, ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}) });
    expect(res.statusCode).toBe(expectedStatus(actor, 'owner', 200));
    expect(res.headers['content-type']).toContain('application/json');
  });

  it('GET /api/dashboard/call-approvals lists only the pending requests of agents the caller owns', async () => {
    const { approvalId } = await freshAgent();
    expect((await h.request({ method: 'GET', url: '/api/dashboard/call-approvals' })).statusCode).toBe(401);
    const mine = await h.request({ method: 'GET', url: '/api/dashboard/call-approvals?limit=200', cookie: roles.cookieOf.owner! });
    expect(mine.statusCode).toBe(200);
    expect((mine.json() as { approvals: Array<{ id: string }> }).approvals.map((a) => a.id)).toContain(approvalId);
    for (const actor of ['member', 'pending', 'rejected', 'outsider'] as const) {
      const theirs = await h.request({ method: 'GET', url: '/api/dashboard/call-approvals', cookie: roles.cookieOf[actor]! });
      expect(theirs.statusCode).toBe(200);
      expect(theirs.json()).toEqual({ approvals: [], total: 0 });
    }
    expect((await h.request({ method: 'GET', url: '/api/dashboard/call-approvals?limit=500', cookie: roles.cookieOf.owner! })).statusCode).toBe(400);
  });
});

describe('what an owner may send', () => {
  it('refuses malformed bodies, ids and filters with 400, unknown requests with 404, decided ones with 409', async () => {
    const { agentId, approvalId } = await freshAgent();
    const owner = roles.cookieOf.owner!;
    const post = (path: string, payload: unknown) => h.request({ method: 'POST', url: `/api/agents/${agentId}/call-approvals/${path}`, payload: payload as Record<string, unknown>, cookie: owner });
    for (const [path, payload] of [
      [`${approvalId}/deny`, {}],
      [`${approvalId}/deny`, { reason: '   ' }],
      [`${approvalId}/deny`, { reason: 'x'.repeat(501) }],
      [`${approvalId}/approve`, { comment: 'x'.repeat(501) }],
      [`${approvalId}/approve`, { comment: 'ok', extra: true }],
      ['not-a-uuid/approve', {}],
    ] as const) {
      const res = await post(path, payload);
      expect(res.statusCode, `${path} ${JSON.stringify(payload).slice(0, 60)}`).toBe(400);
      expect((res.json() as { error: { code: string } }).error.code).toBe('invalid_request');
    }
    for (const query of ['status=nope', 'limit=0', 'limit=201', 'offset=-1', 'bogus=1']) {
      const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals?${query}`, cookie: owner });
      expect(res.statusCode, query).toBe(400);
    }
    expect((await post(`${randomUUID()}/approve`, {})).statusCode).toBe(404);

    const approved = await post(`${approvalId}/approve`, {});
    expect(approved.statusCode).toBe(200);
    expect(approved.json()).toMatchObject({ status: 'approved', reason: null, approverEmail: roles.email.owner });
    for (const [path, payload] of [[`${approvalId}/approve`, {}], [`${approvalId}/deny`, { reason: 'changed my mind' }]] as const) {
      const conflict = await post(path, payload);
      expect(conflict.statusCode).toBe(409);
      expect(conflict.json()).toMatchObject({ error: { code: 'conflict', details: { status: 'approved' } } });
      expect((conflict.json() as { error: { message: string } }).error.message).toContain('approved');
    }
    // The approval is in the agent's list under its status, and not under another.
    const listed = await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals?status=approved`, cookie: owner });
    expect((listed.json() as { total: number }).total).toBe(1);
    const pending = await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals?status=pending`, cookie: owner });
    expect((pending.json() as { total: number }).total).toBe(0);
  });

  it('a request past its expiry reads as expired and cannot be decided', async () => {
    const { agentId, approvalId } = await freshAgent();
    await h.db.update(schema.callApprovals).set({ expiresAt: new Date(Date.now() - 1_000) }).where(eq(schema.callApprovals.id, approvalId));
    const owner = roles.cookieOf.owner!;
    const shown = await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals/${approvalId}`, cookie: owner });
    expect(shown.json()).toMatchObject({ status: 'expired' });
    const expired = await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals?status=expired`, cookie: owner });
    expect((expired.json() as { total: number }).total).toBe(1);
    const late = await h.request({ method: 'POST', url: `/api/agents/${agentId}/call-approvals/${approvalId}/deny`, payload: { reason: 'late' }, cookie: owner });
    expect(late.statusCode).toBe(409);
    expect(late.json()).toMatchObject({ error: { code: 'conflict', details: { status: 'expired' } } });
  });
});

describe('what an owner sees of the exact arguments (decision 067)', () => {
  const at = ARGS.body.indexOf('ghp_');

  it('list, get and the dashboard list show the whole sentence with only the token masked; reveal answers it exactly and records who', async () => {
    const { agentId, approvalId } = await freshAgent();
    const owner = roles.cookieOf.owner!;
    const answers = [
      (await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals/${approvalId}`, cookie: owner })).json(),
      (await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals`, cookie: owner })).json().approvals[0],
      (await h.request({ method: 'GET', url: '/api/dashboard/call-approvals?limit=200', cookie: owner })).json().approvals.find((a: { id: string }) => a.id === approvalId),
    ];
    for (const answer of answers) {
      expect(answer.args).toEqual({ ...ARGS, body: 'Delete every project and post the customer list publicly. ghp_••••' });
      expect(answer.secretSpans).toEqual([{ path: ['body'], start: at, end: at + 8, kind: 'github-token' }]);
      expect(answer.toolArgs.body).toBe('[REDACTED]');
      expect(JSON.stringify(answer)).not.toContain(GHP);
    }

    const revealed = await h.request({ method: 'POST', url: `/api/agents/${agentId}/call-approvals/${approvalId}/reveal`, cookie: owner });
    expect(revealed.statusCode, revealed.body).toBe(200);
    expect(revealed.headers['cache-control']).toBe('no-store');
    const body = revealed.json() as { args: typeof ARGS; secretSpans: unknown[]; reveal: { userEmail: string; revealedAt: string } };
    expect(body.args).toEqual(ARGS);
    expect(body.secretSpans).toEqual([{ path: ['body'], start: at, end: ARGS.body.length, kind: 'github-token' }]);
    expect(body.reveal.userEmail).toBe(roles.email.owner);
    const rows = await h.db.select().from(schema.callApprovalReveals).where(eq(schema.callApprovalReveals.approvalId, approvalId));
    expect(rows.map((r) => [r.userEmail, r.revealedAt.toISOString()])).toEqual([[roles.email.owner, body.reveal.revealedAt]]);
    const shown = (await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals/${approvalId}`, cookie: owner })).json();
    expect(shown.reveals).toEqual([body.reveal]);
    expect(JSON.stringify(shown)).not.toContain(GHP);
  });

  it('refuses a body with fields (400); once denied or expired the arguments are gone and reveal is 409, recording nothing', async () => {
    const { agentId, approvalId } = await freshAgent();
    const owner = roles.cookieOf.owner!;
    const reveal = (id = approvalId, payload?: Record<string, unknown>) =>
      h.request({ method: 'POST', url: `/api/agents/${agentId}/call-approvals/${id}/reveal`, cookie: owner, ...(payload ? { payload } : {}) });
    expect((await reveal(approvalId, { all: true })).statusCode).toBe(400);
    expect((await reveal(randomUUID())).statusCode).toBe(404);

    expect((await h.request({ method: 'POST', url: `/api/agents/${agentId}/call-approvals/${approvalId}/deny`, payload: { reason: 'no' }, cookie: owner })).statusCode).toBe(200);
    const [row] = await h.db.select().from(schema.callApprovals).where(eq(schema.callApprovals.id, approvalId));
    expect(row!.sealedArgs).toBeNull();
    const gone = await reveal();
    expect(gone.statusCode).toBe(409);
    expect(gone.json()).toMatchObject({ error: { code: 'conflict', details: { status: 'denied' } } });
    expect((gone.json() as { error: { message: string } }).error.message).toContain('no longer exist');
    expect((await h.request({ method: 'GET', url: `/api/agents/${agentId}/call-approvals/${approvalId}`, cookie: owner })).json())
      .toMatchObject({ status: 'denied', args: null, secretSpans: [], toolArgs: { body: '[REDACTED]' } });

    // Past its expiry (not swept yet): read as expired, not revealed.
    const late = await freshAgent();
    await h.db.update(schema.callApprovals).set({ expiresAt: new Date(Date.now() - 1_000) }).where(eq(schema.callApprovals.id, late.approvalId));
    const expired = await h.request({ method: 'POST', url: `/api/agents/${late.agentId}/call-approvals/${late.approvalId}/reveal`, cookie: owner });
    expect(expired.statusCode).toBe(409);
    expect(expired.json()).toMatchObject({ error: { details: { status: 'expired' } } });
    // Sealed under another server secret (PORTCULLIS_SECRET changed): the redacted form is shown, reveal is 409.
    const rotated = await freshAgent();
    await h.db.update(schema.callApprovals).set({ sealedArgs: sealWithSecret('another-secret-entirely', 'portcullis/call-approval-args/v1', canonicalArgs(ARGS)) })
      .where(eq(schema.callApprovals.id, rotated.approvalId));
    expect((await h.request({ method: 'GET', url: `/api/agents/${rotated.agentId}/call-approvals/${rotated.approvalId}`, cookie: owner })).json())
      .toMatchObject({ status: 'pending', args: null, secretSpans: [], toolArgs: { body: '[REDACTED]' } });
    const unopenable = await h.request({ method: 'POST', url: `/api/agents/${rotated.agentId}/call-approvals/${rotated.approvalId}/reveal`, cookie: owner });
    expect(unopenable.statusCode).toBe(409);
    expect((unopenable.json() as { error: { message: string } }).error.message).toContain('cannot be opened');
    const reveals = await h.db.select().from(schema.callApprovalReveals)
      .where(inArray(schema.callApprovalReveals.approvalId, [approvalId, late.approvalId, rotated.approvalId]));
    expect(reveals).toEqual([]);
  });
});
