import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { generate } from 'otplib';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import { apiFromPage, launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct } from '../support/browser.ts';
import { apiClient, signInThroughOutbox } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';

const MEMBER = 'sessions-member@example.com';

type McpClient = Awaited<ReturnType<typeof connectMcp>>['client'];

/** The browser logs each 4xx it was answered itself; those we provoke on purpose are expected. */

/** Reloads `page` until `ready` holds (the audit store makes entries queryable within ~2 s). */
async function reloadUntil(page: Page, ready: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ready()) return;
    if (Date.now() > deadline) throw new Error('the page never showed what was expected');
    await page.waitForTimeout(500);
    await page.reload();
  }
}

describe('audit log, tool sessions and account in a real browser (single process, built dashboard)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let consoleErrors: string[];
  let screenshot: (name: string) => Promise<void>;
  let mcp: McpClient;
  let agentId: string;

  beforeAll(async () => {
    // A fast stream tick, so a stream notices an ended dashboard session within a second.
    [product, browser] = await Promise.all([startProduct({ AUDIT_STREAM_HEARTBEAT_MS: '500' }), launchChromium()]);
    ({ context, page, consoleErrors, screenshot } = await openPage(browser, product.baseUrl));
    ({ client: mcp } = await connectMcp(product.baseUrl, product.demoMemberKey));
    const allowed = await mcp.callTool({ name: 'github__get_me', arguments: {} });
    expect(allowed.isError).toBeFalsy();
    const denied = await mcp.callTool({ name: 'github__delete_repository', arguments: { owner: 'acme', repo: 'api' } });
    expect(denied.isError).toBe(true);
    await signInThroughPage(page, product.outboxDir, DEMO_OWNER_EMAIL);
    const agents = await page.evaluate(() => fetch('/api/agents').then((r) => r.json())) as { agents: Array<{ id: string; name: string }> };
    agentId = agents.agents[0]!.id;
  }, 240_000);

  afterAll(async () => {
    await mcp?.close().catch(() => undefined);
    await context?.close();
    await browser?.close();
    await product?.stop();
  });

  it('the audit page lists the calls, filters by decision in the URL, and expands a row', async () => {
    await page.goto('/audit');
    const rows = page.locator('tr.entry');
    await reloadUntil(page, async () => {
      await page.locator('[data-testid="audit-total"], .empty').first().waitFor();
      return (await rows.filter({ hasText: 'get_me' }).count()) >= 1 && (await rows.filter({ hasText: 'delete_repository' }).count()) >= 1;
    });
    const denied = rows.filter({ hasText: 'delete_repository' }).first();
    await expect(denied.locator('.decision-DENY').textContent()).resolves.toBe('DENY');
    await expect(denied.textContent()).resolves.toContain('Destructive GitHub operations are blocked');
    await expect(denied.textContent()).resolves.toContain('Block destructive GitHub tools');
    await expect(page.getByTestId('audit-total').textContent()).resolves.toMatch(/of \d+ entr/);
    await screenshot('audit-list');

    await page.getByLabel('Decision').selectOption('DENY');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/\/audit\?result=DENY$/);
    await expect.poll(() => page.locator('tr.entry[data-decision="ALLOW"]').count()).toBe(0);
    await page.locator('.results[aria-busy="false"] tr.entry[data-decision="DENY"]').first().waitFor();
    expect(await rows.filter({ hasText: 'get_me' }).count()).toBe(0);

    // The filters live in the URL: a reload shows the same filtered view.
    await page.reload();
    await page.locator('.results[aria-busy="false"] tr.entry[data-decision="DENY"]').first().waitFor();
    await expect(page.getByLabel('Decision').inputValue()).resolves.toBe('DENY');
    expect(await page.locator('tr.entry[data-decision="ALLOW"]').count()).toBe(0);

    // A row expands to its arguments, principal, action and ids.
    await rows.first().getByRole('button').click();
    const details = page.locator('tr.details');
    await details.waitFor();
    await expect(details.textContent()).resolves.toMatch(/Principal[\s\S]*Action[\s\S]*GithubMCP::Action::"delete_repository"[\s\S]*Entry id/);
    await expect(details.locator('pre').textContent()).resolves.toContain('"repo": "api"');
    await screenshot('audit-filtered-deny-expanded');

    // The member dropdown lists the identities in the caller's audit data and filters by member id.
    await page.goto('/audit');
    await page.getByLabel('Member').selectOption({ label: DEMO_OWNER_EMAIL });
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/\/audit\?member=[0-9a-f-]{36}$/);
    await page.locator('.results[aria-busy="false"] tr.entry').first().waitFor();
    expect(await rows.count()).toBeGreaterThanOrEqual(2);

    // Paging: the limit and offset live in the URL too.
    await page.goto('/audit?limit=1');
    await expect(page.getByTestId('audit-total').textContent()).resolves.toMatch(/^\s*Showing 1–1 of [2-9]\d* entries\s*$/);
    await page.getByRole('button', { name: 'Older' }).click();
    await page.waitForURL(/\/audit\?limit=1&offset=1$/);
    await expect.poll(() => page.getByTestId('audit-total').textContent()).toMatch(/Showing 2–2 of/);
    await expect(page.getByRole('button', { name: 'Newer' }).isEnabled()).resolves.toBe(true);

    // A filter nothing matches shows the empty state; a range from the URL fills the form.
    await page.goto('/audit?from=2099-01-01T00:00:00.000Z&tool=get');
    await page.getByText('No audit entries match these filters.').waitFor();
    await expect(page.getByLabel('From').inputValue()).resolves.toMatch(/^209[89]-/);
    await expect(page.getByLabel('Tool').inputValue()).resolves.toBe('get');
    expect(consoleErrors).toEqual([]);
  }, 60_000);

  it('live mode shows a new call within a few seconds, without a reload', async () => {
    await page.goto('/audit?service=github');
    await page.locator('tr.entry').first().waitFor();
    await page.evaluate(() => { (globalThis as unknown as { notReloaded: boolean }).notReloaded = true; });
    const before = await page.locator('tr.entry').count();
    await page.getByRole('button', { name: 'Go live' }).click();
    await page.locator('[data-live-status="live"]').waitFor({ timeout: 10_000 });

    const started = Date.now();
    const result = await mcp.callTool({ name: 'github__search_repositories', arguments: { query: 'portcullis' } });
    expect(result.isError).toBeFalsy();
    const arrived = page.locator('tr.entry.fresh', { hasText: 'search_repositories' });
    await arrived.first().waitFor({ timeout: 5_000 });
    expect(Date.now() - started).toBeLessThan(5_000);
    // Newest first: it is the top row, and it was prepended (the page never reloaded).
    await expect(page.locator('tr.entry').first().textContent()).resolves.toContain('search_repositories');
    expect(await page.locator('tr.entry').count()).toBeGreaterThan(before);
    await expect(page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded)).resolves.toBe(true);
    await screenshot('audit-live');

    await page.getByRole('button', { name: 'Stop live updates' }).click();
    expect(await page.locator('[data-live-status]').count()).toBe(0);
    expect(consoleErrors).toEqual([]);
  }, 60_000);

  it('the export streams a CSV with the spec\'s columns and offers it for download', async () => {
    await page.goto('/audit');
    await page.locator('tr.entry').first().waitFor();
    await page.getByRole('button', { name: 'Export all matching' }).click();
    const save = page.getByRole('link', { name: /^Save portcullis-audit-\d{8}-\d{6}\.csv$/ });
    await save.waitFor({ timeout: 15_000 });
    const ready = await page.getByRole('status').filter({ hasText: 'Ready:' }).textContent();
    const [, shownRows, shownSize] = /Ready: (\d+) rows?, ([\d.]+ (?:B|KB))/.exec(ready ?? '') ?? [];
    await screenshot('audit-export-ready');
    const [download] = await Promise.all([page.waitForEvent('download'), save.click()]);
    expect(download.suggestedFilename()).toMatch(/^portcullis-audit-\d{8}-\d{6}\.csv$/);
    const csv = readFileSync((await download.path())!, 'utf8');
    const [header, ...lines] = csv.split(/\r?\n/).filter(Boolean);
    expect(header).toBe('timestamp,agent,member,tool,service,resource,decision,reason,duration,matched_policy_ids');
    // The progress display counted what arrived: every data row, and every byte.
    expect(Number(shownRows)).toBe(lines.length);
    expect(shownSize).toBe(Buffer.byteLength(csv) < 1024 ? `${Buffer.byteLength(csv)} B` : `${(Buffer.byteLength(csv) / 1024).toFixed(1)} KB`);
    expect(lines.some((l) => l.includes('delete_repository') && l.includes('DENY'))).toBe(true);
    expect(lines.some((l) => l.includes('get_me') && l.includes('ALLOW'))).toBe(true);

    // Cancel: while the export is under way (held back here), the cancel button aborts it.
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    await page.route('**/api/audit/export?*', async (route) => {
      await held;
      await route.continue().catch(() => undefined); // the page gave up on it meanwhile
    });
    await page.getByRole('button', { name: 'Export all matching' }).click();
    await page.getByRole('button', { name: 'Cancel export' }).click();
    await page.getByText('Export cancelled.').waitFor();
    release();
    await page.unroute('**/api/audit/export?*');
    await expect(page.getByRole('button', { name: 'Export all matching' }).isEnabled()).resolves.toBe(true);

    // The same with a filter: only the denied calls.
    await page.goto('/audit?result=DENY');
    await page.locator('tr.entry').first().waitFor();
    await page.getByRole('button', { name: 'Export all matching' }).click();
    await page.getByRole('link', { name: /^Save portcullis-audit-/ }).waitFor({ timeout: 15_000 });
    const [deniedOnly] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: /^Save portcullis-audit-/ }).click()]);
    const deniedLines = readFileSync((await deniedOnly.path())!, 'utf8').split(/\r?\n/).filter(Boolean).slice(1);
    expect(deniedLines.length).toBeGreaterThan(0);
    expect(deniedLines.every((l) => l.includes(',DENY,'))).toBe(true);
    expect(consoleErrors).toEqual([]);
  }, 60_000);

  it('the sessions page lists the MCP session; its activity shows per-tool counts; reset ends it', async () => {
    await page.goto(`/agents/${agentId}/sessions`);
    const row = page.locator('tr[data-session-id]', { hasText: 'portcullis-e2e 1.0.0' });
    await row.first().waitFor();
    await expect(row.first().textContent()).resolves.toContain(DEMO_OWNER_EMAIL);
    await expect(row.first().locator('.badge').textContent()).resolves.toBe('active');
    await screenshot('sessions-list');

    await page.getByLabel('Status').selectOption('terminated');
    await page.waitForURL(/status=terminated/);
    await page.getByText('No terminated sessions').waitFor();
    await page.getByLabel('Status').selectOption('active');
    await page.waitForURL(/status=active/);
    await row.first().getByRole('link').click();
    await page.waitForURL(new RegExp(`/agents/${agentId}/sessions/[0-9a-f-]{36}$`));

    const tools = page.getByRole('table', { name: 'Calls per tool' });
    await reloadUntil(page, async () => {
      await page.getByRole('heading', { name: 'Activity' }).waitFor();
      return (await tools.locator('tr[data-tool="search_repositories"]').count()) === 1;
    });
    const cells = async (tool: string) => tools.locator(`tr[data-tool="${tool}"] td`).allTextContents();
    await expect(cells('get_me')).resolves.toEqual(['github', 'get_me', '1', '1', '0']);
    await expect(cells('delete_repository')).resolves.toEqual(['github', 'delete_repository', '1', '0', '1']);
    await expect(page.getByTestId('calls').textContent()).resolves.toBe('3');
    await expect(page.getByTestId('denied').textContent()).resolves.toBe('1');
    await expect(page.getByRole('table', { name: 'Policy hits' }).textContent()).resolves.toContain('demo-block-destructive-github');
    await screenshot('session-activity');

    await page.getByRole('button', { name: 'Reset session' }).click();
    await page.getByText('Reset this session?').waitFor();
    await screenshot('session-reset-confirm');
    await page.getByRole('button', { name: 'Yes, reset the session' }).click();
    await page.getByText('The session was reset.').waitFor();
    await expect(page.locator('.summary .badge').textContent()).resolves.toBe('terminated');
    await expect(page.locator('.summary dl').textContent()).resolves.toMatch(/Ended.*\(reset\)/);
    // The MCP client's session is over: its next call is refused.
    await expect(mcp.callTool({ name: 'github__get_me', arguments: {} })).rejects.toThrow();
    expect(consoleErrors).toEqual([]);
  }, 60_000);

  it('a member (not an owner) sees only their own tool sessions; the owner sees everyone\'s', async () => {
    // The owner invites and approves through the signed-in page's own session.
    const invite = (await apiFromPage(page, 'POST', `/api/agents/${agentId}/invite`, { email: MEMBER })).body as { token: string };
    const memberApi = apiClient(product.baseUrl);
    await signInThroughOutbox(memberApi, product.outboxDir, MEMBER);
    const joined = await memberApi.call('POST', `/api/agents/${agentId}/join`, { token: invite.token });
    expect(joined.status).toBe(200);
    const memberId = joined.body.memberId as string;
    const approved = (await apiFromPage(page, 'PUT', `/api/agents/${agentId}/members/${memberId}/status`, { status: 'approved' })).status;
    expect(approved).toBe(200);
    const key = await memberApi.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {});
    expect(key.status).toBe(200);
    const { client: memberMcp } = await connectMcp(product.baseUrl, key.body.key as string);

    const member = await openPage(browser, product.baseUrl);
    try {
      await signInThroughPage(member.page, product.outboxDir, MEMBER);
      await member.page.goto(`/agents/${agentId}/sessions`);
      await member.page.getByRole('heading', { name: 'Your tool sessions' }).waitFor();
      const rows = member.page.locator('tr[data-session-id]');
      await rows.first().waitFor();
      await expect(rows.allTextContents()).resolves.toEqual([expect.stringContaining(MEMBER)]);
      await member.screenshot('sessions-member-own');

      // Live mode ends gracefully when the stream says the dashboard session is over
      // (`event: end`, session_ended): the page returns to sign-in, and back here afterwards.
      await member.page.goto('/audit?result=DENY');
      await member.page.getByRole('button', { name: 'Go live' }).click();
      await member.page.locator('[data-live-status="live"]').waitFor({ timeout: 10_000 });
      const ended = await member.page.evaluate(async () => {
        const { sessions } = await (await fetch('/api/users/me/sessions')).json() as { sessions: Array<{ id: string; current: boolean }> };
        return (await fetch(`/api/users/me/sessions/${sessions.find((s) => s.current)!.id}`, { method: 'DELETE' })).status;
      });
      expect(ended).toBe(204);
      await member.page.waitForURL(/\/sign-in\?next=%2Faudit%3Fresult%3DDENY$/, { timeout: 10_000 });
      expect(member.consoleErrors).toEqual([]);
    } finally {
      await memberMcp.close().catch(() => undefined);
      await member.context.close();
    }

    await page.goto(`/agents/${agentId}/sessions`);
    await page.getByRole('heading', { name: 'Tool sessions', exact: true }).waitFor();
    await page.locator('tr[data-session-id]', { hasText: MEMBER }).waitFor();
    await page.locator('tr[data-session-id]', { hasText: DEMO_OWNER_EMAIL }).first().waitFor();
    expect(consoleErrors).toEqual([]);
  }, 60_000);

  it('the account page lists dashboard sessions and enrols MFA with a real TOTP code', async () => {
    await page.goto('/account');
    const current = page.locator('tr[data-session-id]', { hasText: 'this browser' });
    await current.waitFor();
    await expect(current.textContent()).resolves.toContain('Chrome');
    await page.getByRole('button', { name: 'Set up two-factor authentication' }).waitFor();
    await screenshot('account');

    // ?enrol=1 opens straight on enrolment (where sign-in sends users who must enrol).
    await page.goto('/account?enrol=1');
    await page.getByAltText('QR code of your authenticator secret').waitFor();
    const secret = (await page.getByTestId('mfa-secret').textContent())!.trim();
    expect(secret).toMatch(/^[A-Z2-7]{16,}$/);
    await expect(page.getByAltText('QR code of your authenticator secret').getAttribute('src')).resolves.toMatch(/^data:image\/png;base64,/);
    await screenshot('account-mfa-setup');

    const code = await generate({ secret });
    const wrong = code === '000000' ? '111111' : '000000';
    await page.getByLabel('Code from the app').fill(wrong);
    await page.getByRole('button', { name: 'Turn on two-factor authentication' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/code does not match/i);
    await screenshot('account-mfa-wrong-code');
    const wrongCodeErrors = consoleErrors.splice(0);
    expect(unexpectedConsoleErrors(wrongCodeErrors, '400')).toEqual([]);

    await page.getByLabel('Code from the app').fill(code);
    await page.getByRole('button', { name: 'Turn on two-factor authentication' }).click();
    const codes = page.getByRole('list', { name: 'Backup codes' }).locator('code');
    await codes.first().waitFor();
    expect(await codes.count()).toBe(10);
    await expect(page.getByText('they are shown only this once').isVisible()).resolves.toBe(true);
    await page.getByRole('button', { name: 'Copy backup codes' }).waitFor();
    await screenshot('account-mfa-backup-codes');

    await page.getByRole('button', { name: 'I have saved them' }).click();
    await page.getByTestId('mfa-on').waitFor();
    await expect(page.evaluate(() => fetch('/api/auth/status').then((r) => r.json()))).resolves.toMatchObject({ mfa: { enabled: true, satisfied: true } });
    expect(await codes.count()).toBe(0);
    await screenshot('account-mfa-on');
    expect(consoleErrors).toEqual([]);
  }, 60_000);
});
