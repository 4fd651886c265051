import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import {
  VIEWPORTS, apiFromPage, axeViolations, horizontalOverflow, launchChromium, openPage, settled, signInThroughPage, startProduct, unexpectedConsoleErrors,
  type InPage, type RunningProduct,
} from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';

/**
 * Issue 20 part 1, call approvals in the dashboard (decision 063) on the single-process product:
 * the owner writes a Require approval policy in the editor; a real MCP SDK call it covers is held
 * and appears on the open Approvals page without a reload (the live stream); Approve lets the
 * agent's retry through; a Deny needs a reason, and the agent's retry reads it. With the stream
 * refused the page polls; a request decided elsewhere answers Approve with a 409 the page words
 * for people. At 1280×800, 390×844 and in dark mode, with axe. Issue 29 (decision 067): arguments
 * carrying a token show in full with only the token masked; Reveal shows it and is recorded in
 * the request's history.
 */
type OpenedPage = Awaited<ReturnType<typeof openPage>>;
type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }>; _meta?: Record<string, unknown> };
type ApprovalMeta = { id: string; status: string; expiresAt: string; url: string };

const TOOL = 'github__search_repositories';
const ARGS = { query: 'org:acme' };
/** A GitHub token of the right shape (fake), inside an argument of prose. */
const GHP = `ghp_${'Zq7Lm2Xv9Rt4'.repeat(3)}`;
const textOf = (result: CallResult) => result.content.map((c) => c.text).join('\n');
const approvalOf = (result: CallResult) => result._meta?.['portcullis/approval'] as ApprovalMeta | undefined;

describe('call approvals in a real browser (issue 20 part 1)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let agentId = '';
  let mcp: Awaited<ReturnType<typeof connectMcp>>;

  const search = async (args: Record<string, unknown> = ARGS): Promise<CallResult> => await mcp.client.callTool({ name: TOOL, arguments: args }) as CallResult;

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
    owner = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await signInThroughPage(owner.page, product.outboxDir, DEMO_OWNER_EMAIL);
    agentId = ((await apiFromPage(owner.page, 'GET', '/api/agents')).body as { agents: Array<{ id: string }> }).agents[0]!.id;
    mcp = await connectMcp(product.baseUrl, product.demoMemberKey);
  }, 240_000);
  afterAll(async () => {
    await mcp?.transport.terminateSession().catch(() => undefined);
    await mcp?.client.close().catch(() => undefined);
    await owner?.context.close();
    await browser?.close();
    await product?.stop();
  });

  it('a Require approval policy from the editor holds a real call; it appears live, Approve lets the retry through once, Deny\'s reason reaches the agent', async () => {
    const { page, screenshot, consoleErrors } = owner;

    // The editor: the third effect, with its line of explanation.
    await page.goto(`/agents/${agentId}/policies/new`);
    await page.locator('input[name="name"]').fill('Searches need an owner');
    await expect.poll(() => page.locator('select[name="service"]').inputValue()).toBe('github');
    await page.getByLabel('Require approval').check();
    expect(await page.getByTestId('effect-hint').textContent()).toMatch(/wait for an owner to approve/);
    await page.locator('input[name="tool"][value="search_repositories"]').check();
    await page.getByRole('button', { name: 'Create policy' }).click();
    await page.waitForURL(new RegExp(`/agents/${agentId}/policies/[0-9a-f-]{36}\\?created=1$`));
    const policyId = /policies\/([0-9a-f-]{36})/.exec(page.url())![1]!;
    await page.getByText('Calls this policy holds wait for an owner\'s decision').waitFor();

    // The list shows it, and filters by it.
    await page.goto(`/agents/${agentId}/policies?effect=require_approval`);
    const row = page.locator('tr', { hasText: 'Searches need an owner' });
    await expect.poll(() => row.locator('td[data-label="Effect"]').textContent()).toBe('require approval');
    expect(await page.locator('tbody tr').count()).toBe(1);

    // The Approvals tab, open and live before the call is made.
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: /^Approvals/ }).click();
    await page.waitForURL(new RegExp(`/agents/${agentId}/approvals$`));
    await page.getByText('Nothing is waiting').waitFor();
    await expect.poll(() => page.getByTestId('feed-status').textContent()).toContain('Live');
    await page.evaluate(() => { (globalThis as unknown as { untouched: boolean }).untouched = true; });

    const held = await search();
    expect(held.isError).toBe(true);
    expect(textOf(held)).toMatch(/approval/i);
    const first = approvalOf(held)!;
    expect(first).toMatchObject({ status: 'pending' });
    expect(new URL(first.url).pathname + new URL(first.url).search).toBe(`/agents/${agentId}/approvals?id=${first.id}`);

    // Live: within a few seconds, well before the 10 s poll, and without a reload.
    const request = page.locator(`li[data-approval-id="${first.id}"]`);
    await request.waitFor({ timeout: 6_000 });
    expect(await page.evaluate(() => (globalThis as unknown as { untouched?: boolean }).untouched)).toBe(true);
    expect(await request.getByRole('heading').textContent()).toBe(TOOL);
    const requestText = await request.textContent();
    expect(requestText).toContain(DEMO_OWNER_EMAIL);
    expect(requestText).toContain('query: "org:acme"');
    expect(await request.getByRole('link', { name: 'Searches need an owner' }).getAttribute('href')).toBe(`/agents/${agentId}/policies/${policyId}`);
    expect(await request.getByTestId('countdown').textContent()).toMatch(/\b(59|60):\d\d|1:00:00/);
    await expect.poll(() => page.getByTestId('nav-approvals-badge').textContent()).toMatch(/^\s*1\s+to approve/);
    expect(await page.getByTestId('tab-count').textContent()).toMatch(/^1/);
    // The arguments expand to the whole JSON.
    await request.locator('summary').click();
    expect(await request.getByLabel(`Arguments of ${TOOL}`).textContent()).toContain('"query": "org:acme"');
    await settled(page);
    expect((await horizontalOverflow(page)).by).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('call-approvals-pending-desktop');

    // Approve, with a comment.
    await request.getByRole('button', { name: `Approve ${TOOL} for ${DEMO_OWNER_EMAIL}` }).click();
    await request.getByLabel('Comment (optional)').fill('Read-only search, fine');
    expect(await axeViolations(page)).toEqual([]);
    await request.getByRole('button', { name: 'Approve call' }).click();
    await expect.poll(() => page.getByTestId('decision-notice').textContent()).toContain(`Approved ${TOOL} for ${DEMO_OWNER_EMAIL}`);
    const decided = page.locator(`tr[data-approval-id="${first.id}"]`);
    await expect.poll(() => decided.getAttribute('data-status')).toBe('approved');
    expect(await decided.textContent()).toContain('Read-only search, fine');
    expect(await page.getByTestId('nav-approvals-badge').count()).toBe(0);

    // The agent's retry goes through (once), and the page sees it run, live.
    const retried = await search();
    expect(retried.isError).toBeFalsy();
    expect(textOf(retried)).toContain('acme/api');
    await expect.poll(() => decided.getAttribute('data-status'), { timeout: 6_000 }).toBe('executed');
    expect(await decided.locator('td[data-label="Status"]').textContent()).toBe('Approved, ran');

    // The same call again is a new request; this one is denied, and a reason is required.
    const again = await search();
    const second = approvalOf(again)!;
    expect(second.id).not.toBe(first.id);
    const secondRequest = page.locator(`li[data-approval-id="${second.id}"]`);
    await secondRequest.waitFor({ timeout: 6_000 });
    await secondRequest.getByRole('button', { name: `Deny ${TOOL} for ${DEMO_OWNER_EMAIL}` }).click();
    await secondRequest.getByRole('button', { name: 'Deny call' }).click();
    const reason = secondRequest.getByLabel('Reason');
    expect(await reason.getAttribute('aria-invalid')).toBe('true');
    expect(await secondRequest.getByRole('alert').textContent()).toMatch(/Write the reason/);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('call-approvals-deny-reason-desktop');
    await reason.fill('Searches are paused during the audit');
    await secondRequest.getByRole('button', { name: 'Deny call' }).click();
    await expect.poll(() => page.locator(`tr[data-approval-id="${second.id}"]`).getAttribute('data-status')).toBe('denied');
    const denied = await search();
    expect(denied.isError).toBe(true);
    expect(textOf(denied)).toContain('Searches are paused during the audit');
    expect(approvalOf(denied)).toMatchObject({ id: second.id, status: 'denied' });

    // Arguments with a token in them: shown in full, only the token masked; Reveal is recorded.
    const secret = approvalOf(await search({ query: `org:acme leak ${GHP}` }))!;
    const secretRequest = page.locator(`li[data-approval-id="${secret.id}"]`);
    await secretRequest.waitFor({ timeout: 6_000 });
    expect(await secretRequest.locator('summary').textContent()).toContain('query: "org:acme leak ghp_••••"');
    await secretRequest.locator('summary').click();
    const mark = secretRequest.locator('mark.secret');
    expect(await mark.count()).toBe(1);
    expect(await mark.textContent()).toBe('ghp_••••');
    expect(await secretRequest.getByLabel(`Arguments of ${TOOL}`).textContent()).toContain('"query": "org:acme leak ghp_••••"');
    expect(await page.content()).not.toContain(GHP);
    expect(await secretRequest.textContent()).toContain('One value looks like a secret and is masked');
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('call-approvals-masked-desktop');
    await secretRequest.getByRole('button', { name: `Reveal the masked values of ${TOOL} for ${DEMO_OWNER_EMAIL} (recorded)` }).click();
    await expect.poll(() => mark.textContent()).toBe(GHP);
    expect(await mark.getAttribute('class')).toContain('revealed');
    expect(await secretRequest.getByRole('status').textContent()).toContain('your reveal was recorded');
    await expect.poll(() => secretRequest.getByTestId('reveals').textContent()).toContain(`Revealed by ${DEMO_OWNER_EMAIL}`);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('call-approvals-revealed-desktop');
    await secretRequest.getByRole('button', { name: 'Mask again' }).click();
    expect(await mark.textContent()).toBe('ghp_••••');
    // Denied: its history row keeps the reveal (who, when); the exact arguments are gone.
    expect((await apiFromPage(page, 'POST', `/api/agents/${agentId}/call-approvals/${secret.id}/deny`, { reason: 'No tokens in searches' })).status).toBe(200);
    const secretRow = page.locator(`tr[data-approval-id="${secret.id}"]`);
    await expect.poll(() => secretRow.getAttribute('data-status')).toBe('denied');
    expect(await secretRow.getByTestId('reveals').textContent()).toContain(`Revealed by ${DEMO_OWNER_EMAIL}`);
    expect((await apiFromPage(page, 'POST', `/api/agents/${agentId}/call-approvals/${secret.id}/reveal`, {})).status).toBe(409);

    await settled(page);
    expect((await horizontalOverflow(page)).by).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('call-approvals-history-desktop');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0))).toEqual([]);
  });

  it('on a phone and in dark mode: the link an agent is given scrolls to its request; with the stream refused the page polls, and a request decided elsewhere gets a 409 in words', async () => {
    // A new request: other arguments (the denied one keeps answering its reason to the same call until it expires).
    const pending = approvalOf(await search({ query: `deployment ${GHP}` }))!;
    expect(pending.status).toBe('pending');

    const phone = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone, colorScheme: 'dark' });
    try {
      const { page, screenshot, consoleErrors } = phone;
      await signInThroughPage(page, product.outboxDir, DEMO_OWNER_EMAIL);

      // The home overview counts it and links to it.
      await page.goto('/');
      const card = page.getByTestId('call-approvals');
      await card.getByRole('link', { name: TOOL }).waitFor();
      expect(await page.getByTestId('overview-call-approvals').textContent()).toBe('1');
      await settled(page);
      expect((await horizontalOverflow(page)).by).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot('call-approvals-home-phone-dark');

      // No live stream for this page: it falls back to reading the list every 10 s.
      await page.route('**/call-approvals/events', (route) => route.fulfill({ status: 503, contentType: 'application/json', body: '{"error":{"code":"unavailable","message":"no stream"}}' }));
      await card.getByRole('link', { name: TOOL }).click();
      await page.waitForURL(new RegExp(`/agents/${agentId}/approvals\\?id=${pending.id}$`));
      const request = page.locator(`li[data-approval-id="${pending.id}"]`);
      await request.waitFor();
      expect(await request.getAttribute('aria-current')).toBe('true');
      // On a phone too: the token masked, the Reveal button beside it, nothing wider than the screen.
      expect(await request.locator('summary').textContent()).toContain('deployment ghp_••••');
      await request.getByRole('button', { name: /^Reveal the masked values/ }).waitFor();
      await expect.poll(() => page.evaluate((id) => (globalThis as unknown as InPage & { document: { activeElement: { id?: string } | null } }).document.activeElement?.id === `approval-${id}`, pending.id)).toBe(true);
      await expect.poll(() => page.getByTestId('feed-status').textContent()).toContain('Refreshing every 10 s');
      await settled(page);
      expect((await horizontalOverflow(page)).by).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot('call-approvals-phone-dark');

      // Decided elsewhere (the API, as another owner would) while this page still shows it waiting:
      // its list reads are held at what they said, so only the decision's answer can tell.
      const stale = (await apiFromPage(page, 'GET', `/api/agents/${agentId}/call-approvals?status=pending&limit=200`)).body;
      await page.route(/\/api\/agents\/[^/]+\/call-approvals\?/, (route) => route.fulfill({ json: stale }));
      const otherDecision = await apiFromPage(owner.page, 'POST', `/api/agents/${agentId}/call-approvals/${pending.id}/deny`, { reason: 'Handled by the on-call owner' });
      expect(otherDecision.status).toBe(200);
      await request.getByRole('button', { name: /^Approve/ }).click();
      await request.getByRole('button', { name: 'Approve call' }).click();
      const conflict = page.getByTestId('conflict-notice');
      await conflict.waitFor();
      expect(await conflict.textContent()).toMatch(new RegExp(`already denied by ${DEMO_OWNER_EMAIL.replace('.', '\\.')} at .+ \\(“Handled by the on-call owner”\\)`));
      await expect.poll(() => page.locator(`tr[data-approval-id="${pending.id}"]`).getAttribute('data-status')).toBe('denied');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot('call-approvals-conflict-phone-dark');
      // What the browser logs for the refused stream and the 409 it was made to meet, and nothing else.
      expect(unexpectedConsoleErrors(consoleErrors, '409|503').filter((e) => !/EventSource/.test(e))).toEqual([]);
    } finally {
      await phone.context.close();
    }
  });
});
