import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { DEMO_OWNER_EMAIL, DEMO_POLICY_KEY } from '@portcullis/standalone';
import {
  VIEWPORTS as SIZES, apiFromPage, axeViolations, horizontalOverflow, launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct,
} from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { latestMailTo } from '../support/dashboard-session.ts';
import { apiClient, signInThroughOutbox } from '../support/api-client.ts';
import { freePort } from '../support/processes.ts';

/**
 * Issue 18, the console pages: the home overview, the audit explorer, invites and approvals,
 * simulation samples — at 1280×800 and 390×844, with axe, overflow checks and screenshots.
 */

type OpenedPage = Awaited<ReturnType<typeof openPage>>;

/** The page's globals a test reads in `page.evaluate` (the test's tsconfig has no DOM types). */
type InPage = { document: { activeElement: { id: string; textContent: string | null } } };


describe('the operations console in a real browser: overview, audit explorer, invites, simulation', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let agentId = '';
  /** Calls made through /mcp: allowed, denied, and allowed ones whose upstream failed (Linear is down). */
  const calls = { allowed: 0, denied: 0, upstreamFailed: 0 };

  beforeAll(async () => {
    // Linear's upstream is down (nothing listens on its port): a call there is a real upstream error.
    const downPort = await freePort();
    [product, browser] = await Promise.all([startProduct({ UPSTREAM_LINEAR_URL: `http://127.0.0.1:${downPort}/linear/mcp` }), launchChromium()]);
    // Real tool calls through /mcp: allowed reads and denied destructive calls.
    const { client } = await connectMcp(product.baseUrl, product.demoMemberKey);
    try {
      for (let i = 0; i < 14; i++) {
        const read = await client.callTool({ name: i % 2 ? 'github__get_me' : 'github__search_repositories', arguments: i % 2 ? {} : { query: `q${i}` } });
        expect(read.isError).toBeFalsy();
        calls.allowed += 1;
      }
      for (let i = 0; i < 8; i++) {
        const denied = await client.callTool({ name: 'github__delete_repository', arguments: { owner: 'acme', repo: `r${i}` } });
        expect(denied.isError).toBe(true);
        calls.denied += 1;
      }
    } finally {
      await client.close().catch(() => undefined);
    }
    owner = await openPage(browser, product.baseUrl);
    await signInThroughPage(owner.page, product.outboxDir, DEMO_OWNER_EMAIL);
    const agents = (await apiFromPage(owner.page, 'GET', '/api/agents')).body as { agents: Array<{ id: string }> };
    agentId = agents.agents[0]!.id;
    // Wait until every call is queryable.
    for (let waited = 0; (await apiFromPage(owner.page, 'GET', '/api/audit?service=github&limit=1')).body.total < calls.allowed + calls.denied; waited += 250) {
      if (waited > 20_000) throw new Error('the calls never became queryable');
      await owner.page.waitForTimeout(250);
    }
  }, 240_000);

  afterAll(async () => {
    await owner?.context.close();
    await browser?.close();
    await product?.stop();
  });

  for (const [size, viewport] of Object.entries(SIZES)) it(`the home overview at ${size} shows the audit service's series, equal to GET /api/audit's counts; a bar and a row open the filtered log`, async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.setViewportSize(viewport);
    await page.goto('/');
    const chart = page.getByTestId('overview-series');
    await chart.waitFor();
    const kpis = page.getByRole('list', { name: 'Totals' });
    const from = (await kpis.getAttribute('data-from'))!;
    const to = (await kpis.getAttribute('data-to'))!;
    const range = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
    const all = (await apiFromPage(page, 'GET', `/api/audit?${range}&limit=1`)).body.total as number;
    const deniedTotal = (await apiFromPage(page, 'GET', `/api/audit?${range}&result=DENY&limit=1`)).body.total as number;
    expect(all).toBeGreaterThanOrEqual(calls.allowed + calls.denied);
    expect(deniedTotal).toBe(calls.denied);
    await expect(page.getByTestId('overview-calls').textContent()).resolves.toBe(String(all));
    await expect(page.getByTestId('overview-denied').textContent()).resolves.toBe(String(deniedTotal));
    // The bars are the server's series: they add up to the same counts.
    const bars = chart.locator('a.bar');
    const sums = await bars.evaluateAll((as) => as.reduce((t, a) => ({ calls: t.calls + Number(a.dataset.calls), denied: t.denied + Number(a.dataset.denied) }), { calls: 0, denied: 0 }));
    expect(sums).toEqual({ calls: all, denied: deniedTotal });
    await page.getByTestId('top-denied-tools').getByRole('link', { name: /delete_repository/ }).waitFor();
    await expect(page.getByTestId('top-denied-policies').textContent()).resolves.toContain('Block destructive GitHub tools');
    await expect(page.getByTestId('member-deny-rates').textContent()).resolves.toContain(DEMO_OWNER_EMAIL);
    await screenshot(`console-overview-chart-${size}`);

    // A bar opens the audit log of its period: the same number of entries.
    const bar = chart.locator('a.bar:not([data-calls="0"])').last();
    const inBar = Number(await bar.getAttribute('data-calls'));
    await bar.click();
    await page.waitForURL(/\/audit\?from=[^&]+&to=[^&]+$/);
    await expect.poll(() => page.getByTestId('audit-total').textContent()).toMatch(new RegExp(`of ${inBar} entr`));

    // A row of a top list opens the log filtered by it.
    await page.goBack();
    await page.getByTestId('top-denied-tools').getByRole('link', { name: /delete_repository/ }).click();
    await page.waitForURL(/\/audit\?service=github&tool=delete_repository&result=DENY&range=24h$/);
    await expect.poll(() => page.getByTestId('audit-total').textContent()).toMatch(new RegExp(`of ${calls.denied} entr`));
    await page.locator('[data-chip="result"]').waitFor();
    expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
  });

  it('the audit explorer: presets, dropdowns by name, chips, cell filters, a histogram, 20+ dense rows at 1920×1080', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.setViewportSize({ width: 1920, height: 1080 });
    await page.goto('/audit');
    const rows = page.locator('tr.entry');
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(calls.allowed + calls.denied);
    // Dense: at least 20 rows inside the window, without scrolling.
    const visible = await rows.evaluateAll((trs) => trs.filter((tr) => tr.getBoundingClientRect().bottom <= (globalThis as unknown as { innerHeight: number }).innerHeight).length);
    expect(visible).toBeGreaterThanOrEqual(20);
    await page.getByTestId('audit-histogram').waitFor();
    await screenshot('console-audit-1920');

    // Policy by name, sending the id.
    const policies = (await apiFromPage(page, 'GET', `/api/agents/${agentId}/policies`)).body.policies as Array<{ id: string; name: string; policyKey: string }>;
    const demo = policies.find((p) => p.policyKey === DEMO_POLICY_KEY)!;
    await page.getByLabel('Policy').selectOption({ label: demo.name });
    await page.waitForURL(new RegExp(`/audit\\?policy=${demo.id}$`));
    await expect.poll(() => page.locator('.results[aria-busy="false"] tr.entry').count()).toBe(calls.denied);
    await page.locator('[data-chip="policy"]', { hasText: demo.name }).waitFor();

    // A preset: the last hour, kept in the URL as a relative range.
    await page.getByRole('group', { name: 'Time range' }).getByRole('button', { name: '1 h' }).click();
    await page.waitForURL(new RegExp(`/audit\\?policy=${demo.id}&range=1h$`));
    await page.locator('[data-chip="range"]').waitFor();

    // Removing a chip removes its filter.
    await page.locator('[data-chip="policy"] a').click();
    await page.waitForURL(/\/audit\?range=1h$/);
    await expect.poll(() => page.locator('.results[aria-busy="false"] tr.entry').count()).toBeGreaterThanOrEqual(calls.allowed + calls.denied);

    // A click on a cell filters by its value.
    await rows.filter({ hasText: 'get_me' }).first().locator('a.filter', { hasText: 'get_me' }).click();
    await page.waitForURL(/\/audit\?tool=get_me&range=1h$/);
    await expect.poll(() => page.locator('.results[aria-busy="false"] tr.entry').count()).toBe(calls.allowed / 2);
    await expect(page.getByLabel('Tool', { exact: true }).inputValue()).resolves.toBe('get_me');

    // The histogram counts what the list counts; a bar zooms into its time.
    const histogram = page.getByTestId('audit-histogram');
    const bars = histogram.locator('a.bar[data-calls]:not([data-calls="0"])');
    await bars.first().waitFor();
    // Polled: right after the cell click the previous (unfiltered) histogram may still be shown.
    const counted = () => histogram.locator('a.bar').evaluateAll((as) => as.reduce((n, a) => n + Number(a.getAttribute('data-calls')), 0));
    await expect.poll(counted).toBe(calls.allowed / 2);
    await bars.first().click();
    await page.waitForURL(/\/audit\?from=[^&]+&to=[^&]+&tool=get_me$/);
    await page.getByLabel('From').waitFor();
    await page.locator('.results[aria-busy="false"]').waitFor();
    await expect.poll(() => page.getByText('Updating…').count()).toBe(0);
    await screenshot('console-audit-filtered');
    expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
  });

  it('an upstream that is down: the overview lists the agent under "agents with upstream errors"; its row and the agent dropdown open that agent\'s log by id', async () => {
    const { client } = await connectMcp(product.baseUrl, product.demoMemberKey);
    try {
      const failure = await client.callTool({ name: 'linear__list_issues', arguments: {} }).then(() => undefined, (err: Error) => err);
      expect(failure?.message).toMatch(/Linear: The connector cannot be reached/);
      calls.upstreamFailed += 1; // allowed by policy; its entry records the upstream's failure
    } finally {
      await client.close().catch(() => undefined);
    }
    const { page, screenshot, consoleErrors } = owner;
    await page.setViewportSize(SIZES.desktop);
    const failed = async () => ((await apiFromPage(page, 'GET', '/api/audit?service=linear')).body.entries as Array<{ reason: string }>)
      .filter((e) => e.reason.includes('; upstream error: The connector cannot be reached')).length;
    await expect.poll(failed, { timeout: 20_000 }).toBe(1);
    const agentName = (await apiFromPage(page, 'GET', `/api/agents/${agentId}`)).body.name as string;

    await page.goto('/');
    const panel = page.getByTestId('agents-with-errors');
    const row = panel.getByRole('link', { name: new RegExp(agentName) });
    await row.waitFor();
    await expect(row.locator('.value').textContent()).resolves.toBe('1');
    expect(await row.getAttribute('title')).toBe('1 calls whose upstream failed');
    await panel.scrollIntoViewIfNeeded();
    await screenshot('console-overview-upstream-errors');
    await row.click();
    await page.waitForURL(new RegExp(`/audit\\?agentId=${agentId}&range=24h$`));
    await page.locator('[data-chip="agentId"]', { hasText: agentName }).waitFor();
    await expect.poll(() => page.locator('.results[aria-busy="false"] tr.entry', { hasText: 'upstream error' }).count()).toBe(1);
    await expect(page.getByLabel('Agent', { exact: true }).inputValue()).resolves.toBe(agentId);

    // The explorer's agent dropdown sends the exact id, not the name (decision 045).
    await page.goto('/audit');
    await page.locator('.results[aria-busy="false"]').waitFor();
    const asked: string[] = [];
    page.on('request', (request) => { if (new URL(request.url()).pathname === '/api/audit') asked.push(new URL(request.url()).search); });
    await page.getByLabel('Agent', { exact: true }).selectOption({ label: agentName });
    await page.waitForURL(new RegExp(`/audit\\?agentId=${agentId}$`));
    await expect.poll(() => asked.some((q) => q.includes(`agentId=${agentId}`) && !q.includes('agent='))).toBe(true);
    const ofAgent = (await apiFromPage(page, 'GET', `/api/audit?agentId=${agentId}&limit=1`)).body.total as number;
    expect(ofAgent).toBeGreaterThanOrEqual(calls.allowed + calls.denied + calls.upstreamFailed);
    await expect.poll(() => page.getByTestId('audit-total').textContent()).toMatch(new RegExp(`of ${ofAgent} entr`));
    expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
  });

  for (const [size, viewport] of Object.entries(SIZES)) it(`at ${size}, open invites are listed, resent and revoked; a pending member shows a badge and is approved in one click`, async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.setViewportSize(viewport);
    const JOINER = `console-joiner-${size}@example.com`;
    const REVOKED = `console-revoked-${size}@example.com`;
    await page.goto(`/agents/${agentId}/members`);
    const send = async (email: string) => {
      await page.getByLabel('E-mail address to invite').fill(email);
      await page.getByRole('button', { name: 'Send invite' }).click();
      await page.getByText(`We e-mailed an invite to ${email}`).waitFor();
    };
    await send(JOINER);
    await send(REVOKED);
    const invites = page.getByRole('table', { name: 'Open invites' });
    await invites.getByRole('row', { name: new RegExp(JOINER) }).waitFor();
    await invites.getByRole('row', { name: new RegExp(REVOKED) }).waitFor();
    await screenshot(`console-members-invites-${size}`);

    // Resend: a fresh link by mail; the old one stops working.
    const firstLink = latestMailTo(product.outboxDir, JOINER).link;
    await page.getByRole('button', { name: `Resend the invite to ${JOINER}` }).click();
    await page.getByText(`A new link was e-mailed to ${JOINER}`).waitFor();
    const secondLink = latestMailTo(product.outboxDir, JOINER).link;
    expect(secondLink).not.toBe(firstLink);
    await expect(page.getByTestId('copy-value').last().textContent()).resolves.toBe(secondLink);

    // Revoke, after the confirm dialog: the row goes, and the API no longer lists it.
    await page.getByRole('button', { name: `Revoke the invite for ${REVOKED}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke invite' }).click();
    await page.getByText(`The invite for ${REVOKED} was revoked.`).waitFor();
    await expect.poll(() => invites.getByRole('row', { name: new RegExp(REVOKED) }).count()).toBe(0);
    const listed = (await apiFromPage(page, 'GET', `/api/agents/${agentId}/invites`)).body.invites as Array<{ email: string }>;
    expect(listed.map((i) => i.email)).toEqual([JOINER]);

    // The joiner uses the resent link; the old one no longer works.
    const joiner = apiClient(product.baseUrl);
    await signInThroughOutbox(joiner, product.outboxDir, JOINER);
    const tokenOf = (link: string) => new URL(link).searchParams.get('token')!;
    expect((await joiner.call('POST', `/api/agents/${agentId}/join`, { token: tokenOf(firstLink) })).status).toBeGreaterThanOrEqual(400);
    expect((await joiner.call('POST', `/api/agents/${agentId}/join`, { token: tokenOf(secondLink) })).status).toBe(200);

    // The overview counts the pending request; the members page shows a badge and approves in one click.
    await page.goto('/');
    await expect.poll(() => page.getByTestId('overview-pending').textContent()).toBe('1');
    await expect(page.getByTestId('pending-approvals').textContent()).resolves.toContain(JOINER);
    await page.goto(`/agents/${agentId}/members`);
    await expect(page.getByTestId('pending-badge').textContent()).resolves.toBe('1 pending');
    await expect.poll(() => invites.getByRole('row', { name: new RegExp(JOINER) }).count()).toBe(0);
    await screenshot(`console-members-pending-${size}`);
    await page.getByRole('button', { name: `Approve ${JOINER}` }).click();
    await page.getByText(`${JOINER} approved.`).waitFor();
    await expect.poll(() => page.getByTestId('pending-badge').count()).toBe(0);
    expect(unexpectedConsoleErrors(consoleErrors, '40[03]')).toEqual([]);
    consoleErrors.splice(0);

    // The approved member's console: the overview and the explorer over what they may see, no errors.
    const member = await openPage(browser, product.baseUrl);
    try {
      await signInThroughPage(member.page, product.outboxDir, JOINER);
      await member.page.goto('/');
      await member.page.getByTestId('overview-series').waitFor();
      await expect(member.page.getByTestId('overview-calls').textContent()).resolves.toBe(String(calls.allowed + calls.denied + calls.upstreamFailed));
      await member.page.goto('/audit');
      await member.page.getByTestId('audit-histogram').waitFor();
      await member.page.locator('tr.entry').first().waitFor();
      await member.screenshot(`console-audit-member-${size}`);
      expect(member.consoleErrors).toEqual([]);
    } finally {
      await member.context.close();
    }
  });

  it('simulation samples show time, member, tool and both verdicts, with a link to the entry in the audit log', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.setViewportSize(SIZES.desktop);
    await page.goto(`/agents/${agentId}/policies/new`);
    await page.locator('input[name="name"]').fill('No get_me');
    await expect.poll(() => page.locator('select[name="service"]').inputValue()).toBe('github');
    await page.locator('input[name="tool"][value="get_me"]').check();
    await expect.poll(() => page.getByTestId('preview-state').textContent(), { timeout: 10_000 }).toBe('Compiles');
    await page.getByRole('button', { name: 'Run simulation' }).click();
    await page.getByTestId('sim-evaluated').waitFor();
    expect(Number(await page.getByTestId('sim-allow-to-deny').textContent())).toBe(calls.allowed / 2);
    const samples = page.getByRole('table', { name: 'Changed calls' });
    const first = samples.locator('tbody tr').first();
    const cells = await first.locator('td').allTextContents();
    expect(cells[0]).toMatch(/\d{2}:\d{2}/);
    expect(cells[1]).toBe(DEMO_OWNER_EMAIL);
    expect(cells[2]).toBe('github__get_me');
    expect(cells[3]).toMatch(/ALLOW\s*→\s*DENY/);
    await screenshot('console-simulation-samples');

    // The link opens the audit log at that entry, its details shown.
    const entryId = (await first.getAttribute('data-entry-id'))!;
    const href = (await first.getByRole('link').getAttribute('href'))!;
    expect(href).toContain(`entry=${entryId}`);
    await page.goto(href);
    const row = page.locator(`tr.entry[data-entry-id="${entryId}"]`);
    await row.waitFor();
    await expect(page.locator('tr.details').textContent()).resolves.toContain(entryId);
    expect(await page.locator('tr.entry').count()).toBe(1);
    expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
  });

  for (const [size, viewport] of Object.entries(SIZES)) {
    it(`the console pages at ${size} (${viewport.width}×${viewport.height}): no sideways scroll, axe clean, screenshots`, async () => {
      const { page, screenshot, consoleErrors } = owner;
      await page.setViewportSize(viewport);
      const pages: Array<[string, string, () => Promise<void>]> = [
        ['members', `/agents/${agentId}/members`, async () => { await page.getByRole('table', { name: 'Members' }).waitFor(); }],
        ['overview', '/', async () => { await page.getByTestId('overview-series').waitFor(); }],
        ['audit', '/audit', async () => { await page.locator('tr.entry').first().waitFor(); await page.getByTestId('audit-histogram').waitFor(); }],
        ['audit-deny', '/audit?result=DENY&range=24h', async () => { await page.locator('tr.entry').first().waitFor(); }],
      ];
      for (const [name, path, ready] of pages) {
        await page.goto(path);
        await ready();
        await screenshot(`console-${name}-${size}`);
        expect(await horizontalOverflow(page), `${path} scrolls sideways at ${size}`).toEqual({ by: 0, culprits: [] });
        expect(await axeViolations(page), `${path} at ${size}`).toEqual([]);
      }
      // Dark mode (the system setting): the same pages, still axe clean (contrast included).
      if (size === 'desktop') {
        await page.emulateMedia({ colorScheme: 'dark' });
        for (const [name, path, ready] of pages.filter(([n]) => n === 'overview' || n === 'audit')) {
          await page.goto(path);
          await ready();
          await screenshot(`console-${name}-dark`);
          expect(await axeViolations(page), `${path} in dark mode`).toEqual([]);
        }
        await page.emulateMedia({ colorScheme: 'light' });
      }

      // The simulation panel (inside the policy editor): its samples fit, scrolling in their own box.
      await page.goto(`/agents/${agentId}/policies/new`);
      await page.locator('input[name="name"]').fill('No get_me');
      await page.locator('input[name="tool"][value="get_me"]').check();
      await expect.poll(() => page.getByTestId('preview-state').textContent(), { timeout: 10_000 }).toBe('Compiles');
      await page.getByRole('button', { name: 'Run simulation' }).click();
      const samples = page.getByRole('table', { name: 'Changed calls' });
      await samples.waitFor();
      await samples.scrollIntoViewIfNeeded();
      await screenshot(`console-simulation-${size}`);
      const panel = await page.locator('section.simulate').boundingBox();
      expect(panel!.x + panel!.width).toBeLessThanOrEqual(viewport.width);
      if (size === 'phone') {
        await page.goto('/audit');
        await page.locator('tr.entry').first().waitFor();
        await expect(page.getByLabel('Decision').isVisible()).resolves.toBe(false);
        // The drawer takes focus; Escape closes it and gives focus back to its button.
        await page.getByRole('button', { name: /^Filters/ }).click();
        await expect.poll(() => page.evaluate(() => (globalThis as unknown as InPage).document.activeElement.id)).toBe('f-agent');
        await page.keyboard.press('Escape');
        await expect(page.getByLabel('Decision').isVisible()).resolves.toBe(false);
        await expect(page.evaluate(() => (globalThis as unknown as InPage).document.activeElement.textContent?.trim())).resolves.toMatch(/^Filters/);
        await page.getByRole('button', { name: /^Filters/ }).click();
        await page.getByLabel('Decision').selectOption('DENY');
        await page.waitForURL(/\/audit\?result=DENY$/);
        await expect(page.getByLabel('Decision').inputValue()).resolves.toBe('DENY');
        expect(await horizontalOverflow(page)).toEqual({ by: 0, culprits: [] });
        await screenshot('console-audit-drawer-phone');
      }
      expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
    });
  }
});
