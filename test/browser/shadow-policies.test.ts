import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import {
  VIEWPORTS, apiFromPage, axeViolations, horizontalOverflow, launchChromium, openPage, settled, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct,
} from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';

/**
 * Issue 20 part 2, the policy page of a shadow policy (decisions 061-062) on the single-process
 * product: real /mcp calls the shadow forbid would have denied go through; the page shows the
 * counts and the changed calls linking to their audit entries, at 1280×800 and 390×844 with
 * axe; Promote to enforcing (confirmed) makes it enforced, and the next real call is denied.
 */
type OpenedPage = Awaited<ReturnType<typeof openPage>>;
type Page = OpenedPage['page'];

/** Reloads the policy page until its "would deny" count reads `expected` (the audit writer is asynchronous). */
async function untilWouldDeny(page: Page, expected: string): Promise<void> {
  const panel = page.getByTestId('shadow-results');
  await expect.poll(async () => {
    await page.reload();
    await panel.waitFor();
    return (await page.getByTestId('shadow-allow-to-deny').textContent())?.trim();
  }, { timeout: 20_000 }).toBe(expected);
}
type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }> };

describe('a shadow policy\'s page in a real browser (issue 20)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let agentId = '';
  let policyId = '';

  const getMe = async (count: number): Promise<CallResult[]> => {
    const { client, transport } = await connectMcp(product.baseUrl, product.demoMemberKey);
    const results: CallResult[] = [];
    for (let i = 0; i < count; i++) results.push(await client.callTool({ name: 'github__get_me', arguments: {} }) as CallResult);
    await transport.terminateSession().catch(() => undefined);
    await client.close();
    return results;
  };

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
    owner = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await signInThroughPage(owner.page, product.outboxDir, DEMO_OWNER_EMAIL);
    agentId = ((await apiFromPage(owner.page, 'GET', '/api/agents')).body as { agents: Array<{ id: string }> }).agents[0]!.id;
    const created = await apiFromPage(owner.page, 'POST', `/api/agents/${agentId}/policies`, {
      name: 'No profile lookups', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' },
      denyMessage: 'Profile lookups are blocked', mode: 'shadow',
    });
    expect(created.status).toBe(201);
    policyId = (created.body as { id: string }).id;
    // Three calls the shadow forbid covers: all go through.
    expect((await getMe(3)).map((r) => Boolean(r.isError))).toEqual([false, false, false]);
  }, 240_000);
  afterAll(async () => {
    await owner?.context.close();
    await browser?.close();
    await product?.stop();
  });

  it('shows what the shadow policy would have changed, with links to the entries, and promotes it in one step', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.goto(`/agents/${agentId}/policies`);
    await expect.poll(() => page.locator('tr', { hasText: 'No profile lookups' }).textContent()).toContain('(shadow)');
    // The list filters by mode, kept in the URL like its other filters.
    const rowTexts = () => page.locator('tbody tr').allTextContents();
    await page.getByLabel('Mode').selectOption('enforce');
    await page.waitForURL(/[?&]mode=enforce/);
    await expect.poll(async () => (await rowTexts()).some((row) => row.includes('No profile lookups'))).toBe(false);
    await page.getByLabel('Mode').selectOption('shadow');
    await page.waitForURL(/[?&]mode=shadow/);
    await expect.poll(async () => (await rowTexts()).filter((row) => row.includes('No profile lookups')).length).toBe(1);
    expect((await rowTexts()).every((row) => row.includes('(shadow)'))).toBe(true);
    await page.getByRole('link', { name: 'No profile lookups' }).click();
    await page.waitForURL(new RegExp(`/policies/${policyId}$`));
    const panel = page.getByTestId('shadow-results');
    await untilWouldDeny(page, '3');
    expect(await page.getByTestId('shadow-deny-to-allow').textContent()).toBe('0');
    await expect.poll(() => page.getByTestId('shadow-summary').textContent()).toMatch(/would have changed 3 of the \d+ calls/);
    const rows = panel.getByRole('table', { name: 'Calls it would have changed' }).locator('tbody tr');
    expect(await rows.count()).toBe(3);
    expect(await rows.first().textContent()).toContain('ALLOW → DENY');
    const href = await rows.first().getByRole('link', { name: /Open entry/ }).getAttribute('href');
    expect(href).toMatch(/^\/audit\?.*entry=[0-9a-f-]{36}/);
    expect(await page.getByTestId('shadow-badge').textContent()).toBe('Shadow');
    await settled(page);
    expect((await horizontalOverflow(page)).by).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('shadow-policy-desktop');

    // The sample's link opens the entry in the audit explorer: it says what shadow would have decided.
    const entryId = /entry=([0-9a-f-]{36})/.exec(href!)![1]!;
    await rows.first().getByRole('link', { name: /Open entry/ }).click();
    await page.waitForURL(/\/audit\?/);
    // The entry a link points at opens by itself.
    await page.locator(`tr.entry.target[data-entry-id="${entryId}"]`).waitFor();
    expect(await page.getByTestId('shadow-verdict').textContent()).toMatch(/DENY, decided by no-profile-lookups\s*\(not enforced\)/);
    expect(await axeViolations(page)).toEqual([]);
    await page.goBack();
    await page.waitForURL(new RegExp(`/policies/${policyId}$`));
    await panel.waitFor();
    const audit = await apiFromPage(page, 'GET', `/api/audit?agentId=${agentId}&limit=50`);
    const entry = (audit.body as { entries: Array<{ id: string; decision: string; shadowDecision?: string; shadowPolicyIds?: string[] }> }).entries.find((e) => e.id === entryId);
    expect(entry).toMatchObject({ decision: 'ALLOW', shadowDecision: 'DENY', shadowPolicyIds: ['no-profile-lookups'] });

    await page.getByRole('button', { name: 'Promote to enforcing' }).click();
    const dialog = page.getByRole('dialog', { name: /^Enforce/ });
    await dialog.getByText('it would have denied 3 allowed calls').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Promote to enforcing' }).click();
    await page.getByRole('status').filter({ hasText: 'Promoted: enforced from version 2.' }).waitFor();
    expect(await panel.count()).toBe(0);
    expect(await page.getByTestId('shadow-badge').count()).toBe(0);
    expect(await page.getByRole('checkbox', { name: 'Shadow mode' }).isChecked()).toBe(false);
    const listed = (await apiFromPage(page, 'GET', `/api/agents/${agentId}/policies?search=no-profile`)).body as { policies: Array<{ mode: string; version: number }> };
    expect(listed.policies[0]).toMatchObject({ mode: 'enforce', version: 2 });
    const [denied] = await getMe(1);
    expect(denied!.isError).toBe(true);
    expect(denied!.content.map((c) => c.text).join()).toContain('Profile lookups are blocked');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0))).toEqual([]);
  });

  it('on a phone a shadow policy\'s page fits and passes axe', async () => {
    // Back into shadow through the editor's body (a PUT), so the phone sees the panel again.
    const current = ((await apiFromPage(owner.page, 'GET', `/api/agents/${agentId}/policies?search=no-profile`)).body as { policies: Array<Record<string, unknown>> }).policies[0]!;
    const back = await apiFromPage(owner.page, 'PUT', `/api/agents/${agentId}/policies/${policyId}`, {
      name: current.name, service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' }, denyMessage: 'Profile lookups are blocked', mode: 'shadow',
    });
    expect(back.status).toBe(200);
    expect((await getMe(1))[0]!.isError).toBeFalsy();
    const phone = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    try {
      const { page, screenshot, consoleErrors } = phone;
      await signInThroughPage(page, product.outboxDir, DEMO_OWNER_EMAIL);
      await page.goto(`/agents/${agentId}/policies/${policyId}`);
      await untilWouldDeny(page, '1');
      await settled(page);
      expect((await horizontalOverflow(page)).by).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot('shadow-policy-phone');
      expect(await page.getByRole('button', { name: 'Promote to enforcing' }).isVisible()).toBe(true);
      expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
    } finally {
      await phone.context.close();
    }
  });
});
