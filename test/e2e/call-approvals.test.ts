import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { openSseStream, readOutbox, type SseStream } from '@portcullis/gateway/testing';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { ownerAgentWithGithub } from '../support/owner-agent.ts';
import { rawModernMcp } from '../support/raw-modern-mcp.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 20 part 1 end to end (decision 063), on TWO gateway replicas in split mode (real
 * NATS, Postgres, chDB, PDP, sandbox GitHub upstream): a `require_approval` policy holds a
 * call; an owner approves it through the API of the other replica; the same call made again
 * goes upstream exactly once; other arguments, a second retry, a policy change and an expiry
 * are not covered; a denial carries the approver's reason; a 2026-07-28 client with URL
 * elicitation gets `input_required` and completes after approval; the audit tells the story.
 * Issue 29 (decision 067): the owner sees the exact arguments with only their secret-looking
 * spans masked, a reveal is recorded, the sealed arguments are destroyed once the request is
 * executed, denied or expired; open requests are capped per member, also when replicas race.
 */
const OWNER = 'approvals-owner@example.com';
const PENDING_TTL_S = 6;

type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }>; _meta?: Record<string, any> };
interface Approval { id: string; status: string; expiresAt: string; reason: string | null; approverEmail: string | null; auditEntryIds: string[]; argsDigest: string; toolArgs: Record<string, unknown> }
interface AuditEntryView { id: string; tool: string; decision: string; reason: string; approvalId?: string; approvalEvent?: string; approverName?: string; memberName: string; toolArgs: Record<string, unknown> }

/** A GitHub token of the right shape (fake): what a prose argument may carry. */
const GHP = `ghp_${'Zq7Lm2Xv9Rt4'.repeat(3)}`;
const SENTENCE = `Delete every project and post the customer list publicly. ${GHP}`;
const MASKED_SENTENCE = 'Delete every project and post the customer list publicly. ghp_••••';

const textOf = (result: CallResult) => result.content.map((c) => c.text).join('\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const approvalOf = (result: CallResult) => result._meta?.['portcullis/approval'] as { id: string; status: string; expiresAt: string; url: string };

describe('call approvals across two gateway replicas', () => {
  let t: SplitTopology;
  let owner0: ApiClient;
  let owner1: ApiClient;
  let agentId: string;
  let memberKey: string;
  let policyId: string;
  let events: SseStream;
  const title = `Approve me ${Date.now()}`;
  const issueArgs = (suffix = '') => ({ owner: 'acme', repo: 'api', method: 'create', title: `${title}${suffix}` });

  /** One tools/call through the official SDK client (2025 era) on replica `gateway`. */
  async function call(gateway: number, name: string, args: Record<string, unknown>): Promise<CallResult> {
    const { client, transport } = await connectMcp(t.gateways[gateway]!, memberKey);
    try {
      return await client.callTool({ name, arguments: args }) as CallResult;
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  }

  /** Issues titled `text` at the sandbox upstream: how many calls really went through. */
  async function issuesTitled(text: string): Promise<number> {
    const result = await call(0, 'github__list_issues', { owner: 'acme', repo: 'api' });
    expect(result.isError, textOf(result)).toBeFalsy();
    const items = (JSON.parse(textOf(result)) as { items: Array<{ title?: string }> }).items;
    return items.filter((issue) => issue.title === text).length;
  }

  /** What Postgres keeps of a request: its sealed arguments (null once destroyed) and its reveals. */
  async function stored(id: string) {
    const [row] = await t.database.db.select().from(schema.callApprovals).where(eq(schema.callApprovals.id, id));
    const reveals = await t.database.db.select().from(schema.callApprovalReveals).where(eq(schema.callApprovalReveals.approvalId, id));
    return { sealedArgs: row!.sealedArgs, reveals };
  }

  /** The reveal route answers 409 once the exact arguments are destroyed, and records nothing. */
  async function expectDestroyed(id: string, status: string) {
    const before = (await stored(id)).reveals.length;
    expect((await stored(id)).sealedArgs).toBeNull();
    const late = await owner0.call('POST', `/api/agents/${agentId}/call-approvals/${id}/reveal`, {});
    expect(late.status, late.text).toBe(409);
    expect(late.body.error).toMatchObject({ code: 'conflict', details: { status } });
    expect(late.body.error.message).toContain('no longer exist');
    expect((await stored(id)).reveals).toHaveLength(before);
    const shown = (await owner0.call('GET', `/api/agents/${agentId}/call-approvals/${id}`)).body;
    expect(shown).toMatchObject({ status, args: null, secretSpans: [] });
  }

  async function auditUntil(predicate: (entries: AuditEntryView[]) => boolean): Promise<AuditEntryView[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const res = await owner0.call('GET', `/api/audit?agentId=${agentId}&limit=500`);
      expect(res.status, res.text).toBe(200);
      const entries = res.body.entries as AuditEntryView[];
      if (predicate(entries) || Date.now() > deadline) return entries;
      await sleep(150);
    }
  }

  beforeAll(async () => {
    t = await startSplitTopology({
      gatewayCount: 2,
      gatewayEnv: { APPROVAL_PENDING_TTL_SECONDS: String(PENDING_TTL_S), APPROVAL_GRANT_TTL_SECONDS: '60', APPROVAL_SWEEP_INTERVAL_MS: '500' },
    });
    ({ owner: owner0, agentId, ownerKey: memberKey } = await ownerAgentWithGithub(t, { email: OWNER, agentName: 'Approvals agent' }));
    owner1 = apiClient(t.gateways[1]!);
    await signInThroughOutbox(owner1, t.outboxDir, OWNER);
    const created = await owner0.call('POST', `/api/agents/${agentId}/policies`, {
      name: 'Issues need approval', service: 'github', effect: 'require_approval', tools: ['issue_write'], principal: { type: 'all_members' },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.effect).toBe('require_approval');
    policyId = created.body.id;
    // The owner's live stream on replica 1 sees what replica 0 proposes.
    events = await openSseStream(`${t.gateways[1]}/api/agents/${agentId}/call-approvals/events`, { headers: { cookie: owner1.cookie } });
    expect(events.status, events.errorBody).toBe(200);
  }, 120_000);
  afterAll(async () => {
    events?.close();
    await t?.stop();
  });

  it('holds the call, approves it on the other replica, forwards the retry exactly once, and covers nothing else', async () => {
    const held = await call(0, 'github__issue_write', issueArgs());
    expect(held.isError).toBe(true);
    expect(textOf(held)).toContain('needs an owner\'s approval');
    const approval = approvalOf(held);
    expect(approval).toMatchObject({ status: 'pending' });
    expect(textOf(held)).toContain(approval.id);
    expect(approval.url).toBe(`${t.gateways[0]}/agents/${agentId}/approvals?id=${approval.id}`);
    expect(await issuesTitled(title)).toBe(0);

    // The same call again while pending: the same request, no duplicate.
    expect(approvalOf(await call(1, 'github__issue_write', issueArgs())).id).toBe(approval.id);
    const live = await events.waitFor((e) => e.event === 'approval' && e.id === approval.id, 10_000);
    expect(JSON.parse(live.data)).toMatchObject({ id: approval.id, status: 'pending', tool: 'issue_write', service: 'github' });

    // The owner sees it from the other replica, pending, with the arguments; and in the cross-agent list.
    const listed = await owner1.call('GET', `/api/agents/${agentId}/call-approvals?status=pending`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.total).toBe(1);
    expect(listed.body.approvals[0]).toMatchObject({ id: approval.id, memberEmail: OWNER, policyName: 'Issues need approval', toolArgs: issueArgs() });
    const dashboard = await owner1.call('GET', '/api/dashboard/call-approvals');
    expect(dashboard.body.approvals.map((a: Approval) => a.id)).toEqual([approval.id]);

    const approved = await owner1.call('POST', `/api/agents/${agentId}/call-approvals/${approval.id}/approve`, { comment: 'go ahead' });
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', reason: 'go ahead', approverEmail: OWNER });
    expect(Date.parse(approved.body.expiresAt)).toBeGreaterThan(Date.parse(approval.expiresAt) - PENDING_TTL_S * 1000 + 30_000);
    const again = await owner0.call('POST', `/api/agents/${agentId}/call-approvals/${approval.id}/deny`, { reason: 'too late' });
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain('approved');
    await events.waitFor((e) => e.event === 'approval' && e.id === approval.id && JSON.parse(e.data).status === 'approved', 10_000);

    // Two replicas race the retry: exactly one call goes upstream; the other proposes anew.
    const [a, b] = await Promise.all([call(0, 'github__issue_write', issueArgs()), call(1, 'github__issue_write', issueArgs())]);
    const forwarded = [a, b].filter((r) => !r.isError);
    expect(forwarded, `${textOf(a)}\n${textOf(b)}`).toHaveLength(1);
    expect(textOf(forwarded[0]!)).toContain(title);
    const loser = [a, b].find((r) => r.isError)!;
    expect(approvalOf(loser).id).not.toBe(approval.id);
    expect(await issuesTitled(title)).toBe(1);
    expect((await owner0.call('GET', `/api/agents/${agentId}/call-approvals/${approval.id}`)).body).toMatchObject({ status: 'executed' });

    // A second retry is not covered: it is held under the loser's new request, not forwarded.
    const second = await call(0, 'github__issue_write', issueArgs());
    expect(second.isError).toBe(true);
    expect(approvalOf(second).id).toBe(approvalOf(loser).id);
    // Other arguments are another request.
    const other = await call(1, 'github__issue_write', issueArgs(' (edited)'));
    expect(other.isError).toBe(true);
    expect(approvalOf(other).id).not.toBe(approval.id);
    expect(approvalOf(other).id).not.toBe(approvalOf(loser).id);
    expect(await issuesTitled(title)).toBe(1);

    // Denied: the retry gets the approver's reason.
    const denied = await owner1.call('POST', `/api/agents/${agentId}/call-approvals/${approvalOf(loser).id}/deny`, { reason: 'One issue is enough' });
    expect(denied.status, denied.text).toBe(200);
    const refused = await call(0, 'github__issue_write', issueArgs());
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain('One issue is enough');
    expect(approvalOf(refused)).toMatchObject({ id: approvalOf(loser).id, status: 'denied' });

    // A policy change (a new version) invalidates an approval given under the old one.
    expect((await owner0.call('POST', `/api/agents/${agentId}/call-approvals/${approvalOf(other).id}/approve`, {})).status).toBe(200);
    const updated = await owner0.call('PUT', `/api/agents/${agentId}/policies/${policyId}`, {
      name: 'Issues need approval (v2)', service: 'github', effect: 'require_approval', tools: ['issue_write'], principal: { type: 'all_members' },
    });
    expect(updated.status, updated.text).toBe(200);
    let afterChange: CallResult | undefined;
    for (let i = 0; i < 20; i++) { // the PDP reloads on policy.changed: wait until the new version decides
      afterChange = await call(1, 'github__issue_write', issueArgs(' (edited)'));
      if (afterChange.isError && approvalOf(afterChange).id !== approvalOf(other).id) break;
      await sleep(200);
    }
    expect(afterChange!.isError, textOf(afterChange!)).toBe(true);
    expect(approvalOf(afterChange!).id).not.toBe(approvalOf(other).id);
    expect(await issuesTitled(`${title} (edited)`)).toBe(0);

    // The audit: each event an entry of its own, naming the approval.
    const entries = await auditUntil((es) => ['proposed', 'approved', 'executed', 'returned'].every((ev) => es.some((e) => e.approvalId === approval.id && e.approvalEvent === ev)));
    const story = entries.filter((e) => e.approvalId === approval.id);
    expect(story.find((e) => e.approvalEvent === 'proposed')).toMatchObject({ decision: 'DENY', tool: 'issue_write' });
    expect(story.find((e) => e.approvalEvent === 'proposed')!.reason).toContain('Awaiting an owner\'s approval');
    expect(story.find((e) => e.approvalEvent === 'approved')).toMatchObject({ decision: 'ALLOW', approverName: OWNER, memberName: OWNER });
    expect(story.find((e) => e.approvalEvent === 'executed')).toMatchObject({ decision: 'ALLOW' });
    expect(story.find((e) => e.approvalEvent === 'returned')).toMatchObject({ decision: 'ALLOW' });
    expect(story.filter((e) => e.approvalEvent === 'executed')).toHaveLength(1);
    const denialEntries = await auditUntil((es) => es.some((e) => e.approvalId === approvalOf(loser).id && e.approvalEvent === 'denied'));
    expect(denialEntries.find((e) => e.approvalId === approvalOf(loser).id && e.approvalEvent === 'denied')!.reason).toContain('One issue is enough');
    const recorded = (await owner0.call('GET', `/api/agents/${agentId}/call-approvals/${approval.id}`)).body as Approval;
    expect(recorded.auditEntryIds.length).toBeGreaterThanOrEqual(4);

    // The owners were mailed once with a link to the request; the requests proposed within the minute after did not mail again.
    const mails = readOutbox(t.outboxDir).filter((m) => m.to === OWNER && /approval/i.test(m.subject));
    expect(mails).toHaveLength(1);
    expect(mails[0]!.subject).toContain('github__issue_write');
    expect(mails[0]!.text).toContain(`/agents/${agentId}/approvals?id=${approval.id}`);
  }, 120_000);

  it('an unanswered request expires: the retry is told so once, then a new request opens', async () => {
    const args = issueArgs(' (expiring)');
    const held = await call(0, 'github__issue_write', args);
    const id = approvalOf(held).id;
    await sleep(PENDING_TTL_S * 1000 + 1_000);
    const shown = await owner1.call('GET', `/api/agents/${agentId}/call-approvals/${id}`);
    expect(shown.body.status).toBe('expired');
    // The sweep (every 500 ms here) destroyed its exact arguments with the expiry.
    await expectDestroyed(id, 'expired');
    const late = await owner1.call('POST', `/api/agents/${agentId}/call-approvals/${id}/approve`, {});
    expect(late.status).toBe(409);
    expect(late.body.error.message).toContain('expired');
    const told = await call(1, 'github__issue_write', args);
    expect(told.isError).toBe(true);
    expect(textOf(told)).toContain('expired');
    const anew = await call(0, 'github__issue_write', args);
    expect(approvalOf(anew)).toMatchObject({ status: 'pending' });
    expect(approvalOf(anew).id).not.toBe(id);
    const entries = await auditUntil((es) => es.some((e) => e.approvalId === id && e.approvalEvent === 'expired'));
    expect(entries.filter((e) => e.approvalId === id && e.approvalEvent === 'expired')).toHaveLength(1);
    expect(await issuesTitled(`${title} (expiring)`)).toBe(0);
  }, 60_000);

  it('shows the owner the exact arguments with only the secret span masked; a reveal is recorded; executing or denying destroys them', async () => {
    const args = { ...issueArgs(' (secret)'), body: SENTENCE };
    const held = await call(0, 'github__issue_write', args);
    expect(held.isError).toBe(true);
    const { id } = approvalOf(held);
    const at = SENTENCE.indexOf('ghp_');

    // The owner sees the whole sentence; only the token is masked, keeping its public prefix.
    for (const res of [
      await owner1.call('GET', `/api/agents/${agentId}/call-approvals/${id}`),
      { status: 200, text: '', body: (await owner1.call('GET', `/api/agents/${agentId}/call-approvals?status=pending`)).body.approvals.find((a: Approval) => a.id === id) },
    ]) {
      expect(res.status, res.text).toBe(200);
      expect(res.body.args).toEqual({ ...issueArgs(' (secret)'), body: MASKED_SENTENCE });
      expect(res.body.secretSpans).toEqual([{ path: ['body'], start: at, end: at + 'ghp_••••'.length, kind: 'github-token' }]);
      // The audit's redacted form is unchanged, and the token is nowhere in the answer.
      expect(res.body.toolArgs.body).toBe('[REDACTED]');
      expect(JSON.stringify(res.body)).not.toContain(GHP);
      expect(res.body.reveals).toEqual([]);
    }
    const live = await events.waitFor((e) => e.event === 'approval' && e.id === id, 10_000);
    expect(JSON.parse(live.data).args.body).toBe(MASKED_SENTENCE);
    expect(live.data).not.toContain(GHP);
    // At rest, the arguments are sealed: not readable in the row.
    const sealed = (await stored(id)).sealedArgs;
    expect(sealed).toMatch(/^sb1\./);
    expect(sealed).not.toContain('Delete every project');

    // Reveal: the exact value, from the other replica, recorded (who, when) and listed on the request.
    const revealed = await owner0.call('POST', `/api/agents/${agentId}/call-approvals/${id}/reveal`, {});
    expect(revealed.status, revealed.text).toBe(200);
    expect(revealed.headers.get('cache-control')).toBe('no-store');
    expect(revealed.body.args).toEqual(args);
    expect(revealed.body.secretSpans).toEqual([{ path: ['body'], start: at, end: SENTENCE.length, kind: 'github-token' }]);
    expect(revealed.body.reveal).toMatchObject({ userEmail: OWNER });
    const rows = (await stored(id)).reveals;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ approvalId: id, userEmail: OWNER });
    expect(rows[0]!.revealedAt.toISOString()).toBe(revealed.body.reveal.revealedAt);
    const after = await owner1.call('GET', `/api/agents/${agentId}/call-approvals/${id}`);
    expect(after.body.reveals).toEqual([revealed.body.reveal]);
    await events.waitFor((e) => e.event === 'approval' && e.id === id && JSON.parse(e.data).reveals.length === 1, 10_000);

    // The held call's audit entry keeps the redacted form.
    const entries = await auditUntil((es) => es.some((e) => e.approvalId === id && e.approvalEvent === 'proposed'));
    expect(entries.find((e) => e.approvalId === id && e.approvalEvent === 'proposed')!.toolArgs.body).toBe('[REDACTED]');

    // Approved: still shown and revealable until it is used; executed: destroyed in the same statement.
    expect((await owner1.call('POST', `/api/agents/${agentId}/call-approvals/${id}/approve`, {})).status).toBe(200);
    expect((await owner1.call('GET', `/api/agents/${agentId}/call-approvals/${id}`)).body.args.body).toBe(MASKED_SENTENCE);
    expect((await stored(id)).sealedArgs).not.toBeNull();
    const ran = await call(1, 'github__issue_write', args);
    expect(ran.isError, textOf(ran)).toBeFalsy();
    await expectDestroyed(id, 'executed');
    expect((await owner1.call('GET', `/api/agents/${agentId}/call-approvals/${id}`)).body.reveals).toHaveLength(1);

    // Denied: destroyed too.
    const other = approvalOf(await call(0, 'github__issue_write', { ...args, title: `${title} (secret, denied)` })).id;
    expect((await stored(other)).sealedArgs).not.toBeNull();
    expect((await owner0.call('POST', `/api/agents/${agentId}/call-approvals/${other}/deny`, { reason: 'No' })).status).toBe(200);
    await expectDestroyed(other, 'denied');
  }, 60_000);

  it('a 2026-07-28 client with URL elicitation gets input_required, is refused tampered state, and completes after approval', async () => {
    const raw = rawModernMcp(t.gateways, memberKey, { name: 'modern-approvals', version: '1.0.0' });
    const capabilities = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };
    const args = issueArgs(' (modern)');
    const first = await raw.request('tools/call', { name: 'github__issue_write', arguments: args }, { meta: capabilities });
    expect(first.status).toBe(200);
    const result = first.body.result;
    expect(result.resultType).toBe('input_required');
    const request = result.inputRequests['portcullis-approval'];
    expect(request.method).toBe('elicitation/create');
    expect(request.params).toMatchObject({ mode: 'url', elicitationId: result._meta['portcullis/approval'].id });
    expect(request.params.url).toContain(`/agents/${agentId}/approvals?id=${request.params.elicitationId}`);
    expect(typeof result.requestState).toBe('string');

    // requestState is attacker-controlled: altered, it is refused and nothing runs.
    const [payload, signature] = result.requestState.split('.');
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), argsDigest: '0'.repeat(64) })).toString('base64url');
    const tampered = await raw.request('tools/call', { name: 'github__issue_write', arguments: args, requestState: `${forged}.${signature}`, inputResponses: { 'portcullis-approval': { action: 'accept' } } }, { meta: capabilities });
    expect(tampered.body.error).toMatchObject({ code: -32602 });
    expect(tampered.body.error.message).toContain('requestState');
    // Genuine state for other arguments is refused too.
    const elsewhere = await raw.request('tools/call', { name: 'github__issue_write', arguments: { ...args, title: 'other' }, requestState: result.requestState }, { meta: capabilities });
    expect(elsewhere.body.error).toMatchObject({ code: -32602 });

    // Still pending: input_required again.
    const retry = { name: 'github__issue_write', arguments: args, requestState: result.requestState, inputResponses: { 'portcullis-approval': { action: 'accept' } } };
    expect((await raw.request('tools/call', retry, { meta: capabilities })).body.result.resultType).toBe('input_required');
    // A client without the capability gets the plain tool result.
    const plain = await raw.callTool('github__issue_write', args);
    expect(plain).toMatchObject({ resultType: 'complete', isError: true });

    expect((await owner0.call('POST', `/api/agents/${agentId}/call-approvals/${request.params.elicitationId}/approve`, {})).status).toBe(200);
    const done = await raw.request('tools/call', retry, { meta: capabilities });
    expect(done.body.result.resultType, JSON.stringify(done.body)).toBe('complete');
    expect(done.body.result.isError).toBeFalsy();
    expect(await issuesTitled(`${title} (modern)`)).toBe(1);
  }, 60_000);
});

describe('the cap on open approval requests', () => {
  const CAP = 3;
  const AGENT_CAP = 5;
  let t: SplitTopology;
  let owner: ApiClient;
  let agentId: string;
  let memberKey: string;

  async function call(gateway: number, args: Record<string, unknown>, key = memberKey): Promise<CallResult> {
    const { client, transport } = await connectMcp(t.gateways[gateway]!, key);
    try {
      return await client.callTool({ name: 'github__issue_write', arguments: args }) as CallResult;
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  }
  const issue = (n: string) => ({ owner: 'acme', repo: 'api', method: 'create', title: `Capped ${n}` });
  const pendingCount = async () => (await owner.call('GET', `/api/agents/${agentId}/call-approvals?status=pending`)).body.total as number;

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2, gatewayEnv: { APPROVAL_MAX_PENDING_PER_MEMBER: String(CAP), APPROVAL_MAX_PENDING_PER_AGENT: String(AGENT_CAP) } });
    ({ owner, agentId, ownerKey: memberKey } = await ownerAgentWithGithub(t, { email: 'approvals-cap@example.com', agentName: 'Capped agent' }));
    const created = await owner.call('POST', `/api/agents/${agentId}/policies`, {
      name: 'Issues need approval', service: 'github', effect: 'require_approval', tools: ['issue_write'], principal: { type: 'all_members' },
    });
    expect(created.status, created.text).toBe(201);
  }, 120_000);
  afterAll(async () => { await t?.stop(); });

  it('a call over the per-member cap is denied with the queue-full reason and audited; replicas racing at the cap never exceed it', async () => {
    for (const n of ['1', '2', '3']) expect(approvalOf(await call(0, issue(n)))?.status).toBe('pending');
    // The same call again is still its own open request, not a new one: not refused.
    expect(approvalOf(await call(1, issue('1')))?.status).toBe('pending');

    const over = await call(1, issue('4'));
    expect(over.isError).toBe(true);
    expect(textOf(over)).toContain('Approval queue full');
    expect(textOf(over)).toContain(`${CAP} open approval requests (at most ${CAP})`);
    expect(over._meta?.['portcullis/approval']).toBeUndefined();
    expect(await pendingCount()).toBe(CAP);
    const deadline = Date.now() + 10_000;
    let denied: AuditEntryView | undefined;
    while (!denied && Date.now() < deadline) {
      const entries = (await owner.call('GET', `/api/audit?agentId=${agentId}&limit=100`)).body.entries as AuditEntryView[];
      denied = entries.find((e) => e.reason.startsWith('Approval queue full'));
      if (!denied) await sleep(150);
    }
    expect(denied).toMatchObject({ decision: 'DENY', tool: 'issue_write' });
    expect(denied!.approvalId).toBeUndefined();

    // One slot frees up; six different calls race for it on both replicas: one is held, five are refused.
    const first = (await owner.call('GET', `/api/agents/${agentId}/call-approvals?status=pending`)).body.approvals[0] as Approval;
    expect((await owner.call('POST', `/api/agents/${agentId}/call-approvals/${first.id}/deny`, { reason: 'make room' })).status).toBe(200);
    const raced = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((n, i) => call(i % 2, issue(`race ${n}`))));
    expect(raced.filter((r) => approvalOf(r)?.status === 'pending'), raced.map(textOf).join('\n')).toHaveLength(1);
    expect(raced.filter((r) => textOf(r).includes('Approval queue full'))).toHaveLength(5);
    expect(await pendingCount()).toBe(CAP);
  }, 60_000);

  it('the agent\'s cap holds for all its members together', async () => {
    const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'bob', name: 'Bob' });
    const bob = await addMember(t.database.db, { agentId, email: 'approvals-cap-bob@example.com', status: 'approved', connect: { github: token } });
    // The owner's three and two of Bob's fill the agent's five; Bob's third is refused for the agent, not for him.
    for (const n of ['bob 1', 'bob 2']) expect(approvalOf(await call(0, issue(n), bob.memberKey))?.status).toBe('pending');
    expect(await pendingCount()).toBe(AGENT_CAP);
    const over = await call(1, issue('bob 3'), bob.memberKey);
    expect(over.isError).toBe(true);
    expect(textOf(over)).toContain(`Approval queue full: this agent has ${AGENT_CAP} open approval requests (at most ${AGENT_CAP})`);
    expect(await pendingCount()).toBe(AGENT_CAP);
  }, 60_000);
});
