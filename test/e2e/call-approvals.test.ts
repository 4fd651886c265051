import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSseStream, readOutbox, type SseStream } from '@portcullis/gateway/testing';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
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
 */
const OWNER = 'approvals-owner@example.com';
const PENDING_TTL_S = 6;

type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }>; _meta?: Record<string, any> };
interface Approval { id: string; status: string; expiresAt: string; reason: string | null; approverEmail: string | null; auditEntryIds: string[]; argsDigest: string; toolArgs: Record<string, unknown> }
interface AuditEntryView { id: string; tool: string; decision: string; reason: string; approvalId?: string; approvalEvent?: string; approverName?: string; memberName: string }

const textOf = (result: CallResult) => result.content.map((c) => c.text).join('\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

  const approvalOf = (result: CallResult) => result._meta?.['portcullis/approval'] as { id: string; status: string; expiresAt: string; url: string };

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
