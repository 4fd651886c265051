import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { DEMO_OWNER_EMAIL, DEMO_POLICY_KEY } from '@portcullis/standalone';
import { apiFromPage, launchChromium, openPage, signInThroughPage, startProduct, type RunningProduct } from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';

/**
 * Issue 8, Policies UI: the demo owner lists the demo agent's policies, authors a forbid policy
 * by tier with the live Cedar preview, meets inline errors for an invalid draft, simulates it
 * against real MCP traffic, saves, toggles, edits, and restores an old version from the history.
 */
describe('policies in the dashboard (real browser, single process, demo agent)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let consoleErrors: string[];
  let screenshot: (name: string) => Promise<void>;
  let agentId: string;
  let policyId: string;
  /** 4xx responses this test provokes on purpose; the browser logs each as a failed resource. */
  let expected4xx = 0;

  /** The page's own session calls the API, as the dashboard does. */
  const apiGet = async <T>(path: string): Promise<T> => (await apiFromPage(page, 'GET', path)).body as T;

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
    ({ context, page, consoleErrors, screenshot } = await openPage(browser, product.baseUrl));
    await signInThroughPage(page, product.outboxDir, DEMO_OWNER_EMAIL);
    const { agents } = await apiGet<{ agents: Array<{ id: string; name: string }> }>('/api/agents');
    agentId = agents[0]!.id;

    // Traffic for Simulate: a write GitHub call (allowed today), a read, and a destructive one the demo policy denies.
    const { client } = await connectMcp(product.baseUrl, product.demoMemberKey);
    await client.callTool({ name: 'github__get_me', arguments: {} });
    await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'web', title: 'From the policies browser test' } });
    await client.callTool({ name: 'github__add_issue_comment', arguments: { owner: 'acme', repo: 'web', issue_number: 1, body: 'hello' } });
    await client.callTool({ name: 'github__delete_file', arguments: { owner: 'acme', repo: 'web', path: 'README.md', message: 'x', branch: 'main' } });
    await client.close();
    // Harvested entities for the resource picker.
    const refresh = await fetch(`${product.baseUrl}/api/agents/${agentId}/entities/github/refresh`, { method: 'POST', headers: { authorization: `Bearer ${product.demoMemberKey}` } });
    expect(refresh.status).toBe(200);
    // The audit entries are written asynchronously; Simulate reads them back.
    for (let i = 0; i < 100; i++) {
      const { total } = await apiGet<{ total: number }>(`/api/audit?agent=${agentId}&service=github`);
      if (total >= 4) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await product?.stop();
  });

  it('lists the demo policy with filters, sorting and paging in the URL', async () => {
    await page.goto(`/agents/${agentId}/policies`);
    const demoRow = page.locator(`tr[data-policy-key="${DEMO_POLICY_KEY}"]`);
    await demoRow.waitFor();
    await expect(demoRow.textContent()).resolves.toMatch(/Block destructive GitHub tools.*GitHub.*forbid.*destructive tier.*All members/s);
    await screenshot('policies-list');

    await page.getByLabel('Effect').selectOption('permit');
    await page.waitForURL(/effect=permit/);
    await page.getByText('No policy matches these filters').waitFor();
    await page.getByLabel('Effect').selectOption('');
    await page.getByRole('searchbox').fill('destructive');
    await page.waitForURL(/search=destructive/);
    await demoRow.waitFor();
    await page.getByRole('button', { name: /^Name/ }).click();
    await page.waitForURL(/sortBy=name&sortDir=asc/);
    await demoRow.waitFor();
    await expect(page.locator('nav[aria-label="Pages"]').textContent()).resolves.toContain('1–1 of 1');
  });

  it('creates a forbid policy on the GitHub write tier; the Cedar preview follows; an invalid draft shows inline errors; simulate counts the traffic', async () => {
    await page.goto(`/agents/${agentId}/policies`);
    await page.getByRole('link', { name: 'New policy' }).click();
    await page.waitForURL(/\/policies\/new$/);
    await page.locator('input[name="name"]').fill('Block GitHub writes');
    await expect.poll(() => page.locator('select[name="service"]').inputValue()).toBe('github');
    await page.getByLabel('Select whole write tier').check();
    const cedar = page.getByTestId('cedar-preview');
    await expect.poll(() => cedar.textContent(), { timeout: 10_000 }).toMatch(/forbid[\s\S]*GithubMCP::Action::"issue_write"/);
    expect(await cedar.textContent()).not.toContain('delete_file');
    // The preview follows the draft: a single destructive tool joins.
    await page.locator('input[name="tool"][value="delete_file"]').check();
    await expect.poll(() => cedar.textContent(), { timeout: 10_000 }).toContain('GithubMCP::Action::"delete_file"');
    await page.locator('input[name="tool"][value="delete_file"]').uncheck();
    await expect.poll(() => cedar.textContent(), { timeout: 10_000 }).not.toContain('delete_file');
    await page.locator('textarea[name="denyMessage"]').fill('Writes to GitHub are paused for this agent.');
    await screenshot('policy-new-preview');

    // An invalid draft: an unknown time zone and a broken regex, each named next to its field.
    await page.getByLabel('Time window').check();
    await page.getByRole('button', { name: 'Type a time zone instead' }).click();
    await page.getByLabel('Time zone (IANA name)').fill('Mars/Olympus_Mons');
    const zoneError = page.locator('[data-field="conditions.timeWindow.timeZone"]');
    await expect.poll(() => zoneError.textContent(), { timeout: 10_000 }).toMatch(/IANA time zone/);
    await expect(page.getByLabel('Time zone (IANA name)').getAttribute('aria-invalid')).resolves.toBe('true');
    await page.getByRole('button', { name: 'Add argument rule' }).click();
    await page.getByRole('group', { name: 'Argument rule 1' }).getByLabel('Path').fill('title');
    await page.getByRole('group', { name: 'Argument rule 1' }).getByLabel('Test').selectOption('regex');
    await page.getByRole('group', { name: 'Argument rule 1' }).getByLabel('Pattern').fill('([unclosed');
    const regexError = page.locator('[data-field="conditions.args.0"]');
    await expect.poll(() => regexError.textContent(), { timeout: 10_000 }).toMatch(/valid regular expression/);
    await expect(page.getByRole('list', { name: 'Preview errors' }).textContent()).resolves.toMatch(/timeZone/);
    // Saving anyway: the API's 400 is shown readably and its field highlighted.
    await page.getByRole('button', { name: 'Create policy' }).click();
    // In words (issue 18): the field's name and the problem, never the route's validation text.
    const saveError = page.locator('form.policy-form > .error');
    await saveError.waitFor();
    await expect(saveError.textContent()).resolves.toMatch(/^Time zone must be an IANA time zone/);
    await expect(saveError.textContent()).resolves.not.toMatch(/Invalid body field/);
    expected4xx += 1;
    await screenshot('policy-invalid-draft');

    // Fixed: back to the list of zones, the rule removed, the window off.
    await page.getByRole('button', { name: 'Choose from the list' }).click();
    await page.getByRole('button', { name: 'Remove argument rule 1' }).click();
    await page.getByLabel('Time window').uncheck();
    await expect.poll(() => page.getByTestId('preview-state').textContent(), { timeout: 10_000 }).toBe('Compiles');
    await expect(page.locator('form.policy-form [role="alert"]').count()).resolves.toBe(0);

    // Simulate against the traffic made above: the allowed write calls would now be denied.
    await page.getByRole('button', { name: 'Run simulation' }).click();
    await page.getByTestId('sim-evaluated').waitFor();
    expect(Number(await page.getByTestId('sim-evaluated').textContent())).toBeGreaterThanOrEqual(4);
    expect(Number(await page.getByTestId('sim-allow-to-deny').textContent())).toBe(2);
    expect(Number(await page.getByTestId('sim-deny-to-allow').textContent())).toBe(0);
    const samples = page.getByRole('table', { name: 'Changed calls' });
    await expect(samples.textContent()).resolves.toContain('Writes to GitHub are paused for this agent.');
    await screenshot('policy-simulate');

    await page.getByRole('button', { name: 'Create policy' }).click();
    await page.waitForURL(/\/policies\/[0-9a-f-]{36}\?created=1$/);
    policyId = /\/policies\/([0-9a-f-]{36})/.exec(page.url())![1]!;
    await page.getByText('Policy created.').waitFor();
    await expect(page.locator('h2').first().textContent()).resolves.toBe('Block GitHub writes');
    await screenshot('policy-created');
  });

  it('toggles the new policy from the list, without deleting it', async () => {
    await page.goto(`/agents/${agentId}/policies`);
    const row = page.locator('tr[data-policy-key="block-github-writes"]');
    await row.waitFor();
    await expect(row.textContent()).resolves.toMatch(/write tier/);
    const toggle = row.getByRole('switch');
    expect(await toggle.isChecked()).toBe(true);
    // Turning a forbid off is confirmed first (issue 18): Cancel keeps it on.
    await toggle.click();
    const dialog = page.getByRole('dialog', { name: /^Turn off/ });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect(await toggle.isChecked()).toBe(true);
    await toggle.click();
    await dialog.getByRole('button', { name: 'Turn off' }).click();
    await row.getByText('Off').waitFor();
    await screenshot('policies-toggled');
    const listed = await apiGet<{ policies: Array<{ id: string; enabled: boolean }> }>(`/api/agents/${agentId}/policies`);
    expect(listed.policies.find((p) => p.id === policyId)!.enabled).toBe(false);
    await toggle.click();
    await row.getByText('On').waitFor();
  });

  it('edits the policy; the save makes a new version', async () => {
    await page.locator('tr[data-policy-key="block-github-writes"]').getByRole('link', { name: 'Block GitHub writes' }).click();
    await page.waitForURL(new RegExp(`/policies/${policyId}$`));
    const name = page.locator('input[name="name"]');
    await expect.poll(() => name.inputValue()).toBe('Block GitHub writes');
    expect(await page.getByLabel('Select whole write tier').isChecked()).toBe(true);
    await name.fill('Block GitHub writes (edited)');
    await page.locator('textarea[name="denyMessage"]').fill('Edited: GitHub writes need an owner.');
    await page.locator('input[name="tool"][value="delete_file"]').check();
    // Only for the listed member, and only on one harvested repository (the entity picker).
    await page.getByLabel('Only these members').check();
    await page.getByRole('checkbox', { name: /demo@portcullis\.local/ }).check();
    await page.getByLabel('Resources', { exact: true }).check();
    await page.getByLabel('Search entities').fill('acme');
    const results = page.getByRole('list', { name: 'Entity search results' });
    await results.locator('li', { has: page.locator('code', { hasText: /^acme\/api$/ }) }).getByRole('button', { name: 'Add' }).click();
    await expect(page.getByRole('list', { name: 'Selected resources' }).textContent()).resolves.toContain('acme/api');
    const cedar = page.getByTestId('cedar-preview');
    await expect.poll(() => cedar.textContent(), { timeout: 10_000 }).toMatch(/GithubMCP::Repository::"acme\/api"/);
    expect(await cedar.textContent()).toMatch(/Portcullis::Member::"[0-9a-f-]{36}"/);
    await expect.poll(() => page.getByTestId('preview-state').textContent(), { timeout: 10_000 }).toBe('Compiles');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved as version 4.').waitFor();
    await screenshot('policy-edited');
    // Opened again, the editor shows what was saved, conditions included.
    await page.reload();
    await expect.poll(() => name.inputValue()).toBe('Block GitHub writes (edited)');
    expect(await page.getByLabel('Resources', { exact: true }).isChecked()).toBe(true);
    await expect(page.getByRole('list', { name: 'Selected resources' }).textContent()).resolves.toContain('acme/api');
    expect(await page.getByRole('checkbox', { name: /demo@portcullis\.local/ }).isChecked()).toBe(true);
    expect(await page.locator('input[name="tool"][value="delete_file"]').isChecked()).toBe(true);
  });

  it('shows the history, a diff of two versions, and restores the first one after confirmation', async () => {
    await page.getByRole('link', { name: 'Version history' }).click();
    await page.waitForURL(new RegExp(`/policies/${policyId}/versions$`));
    const rows = page.getByRole('table', { name: 'Versions' }).locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(4);
    await expect(rows.allTextContents()).resolves.toEqual([
      expect.stringMatching(/v4.*update.*demo@portcullis\.local/s),
      expect.stringMatching(/v3.*toggle/s),
      expect.stringMatching(/v2.*toggle/s),
      expect.stringMatching(/v1.*create/s),
    ]);
    await page.getByLabel('Compare version 1').check();
    await page.getByLabel('Compare version 4').check();
    const diffs = page.getByRole('region', { name: 'Differences' });
    await diffs.waitFor();
    const snapshotDiff = await diffs.getByLabel('Snapshot').textContent();
    expect(snapshotDiff).toMatch(/^- +"name": "Block GitHub writes",$/m);
    expect(snapshotDiff).toMatch(/^\+ +"name": "Block GitHub writes \(edited\)",$/m);
    expect(snapshotDiff).toMatch(/^ {2} +"service": "github",$/m);
    expect(await diffs.getByLabel('Cedar').textContent()).toMatch(/^\+ .*GithubMCP::Action::"delete_file"/m);
    await screenshot('policy-versions-diff');

    await page.getByRole('button', { name: 'Restore v1' }).click();
    const dialog = page.getByRole('alertdialog');
    await expect(dialog.textContent()).resolves.toContain('Restore version 1?');
    await dialog.getByRole('button', { name: 'Yes, restore version 1' }).click();
    await page.getByText('Version 1 restored as version 5.').waitFor();
    await expect.poll(() => rows.count()).toBe(5);
    await expect(rows.first().textContent()).resolves.toMatch(/v5.*restore/s);
    const listed = await apiGet<{ policies: Array<{ id: string; name: string; denyMessage: string }> }>(`/api/agents/${agentId}/policies`);
    expect(listed.policies.find((p) => p.id === policyId)).toMatchObject({ name: 'Block GitHub writes', denyMessage: 'Writes to GitHub are paused for this agent.' });
    await screenshot('policy-restored');
  });

  it('deletes the policy from the editor after confirmation; its history stays and a restore brings it back', async () => {
    await page.getByRole('link', { name: 'Edit policy' }).click();
    await page.waitForURL(new RegExp(`/policies/${policyId}$`));
    await expect.poll(() => page.locator('input[name="name"]').inputValue()).toBe('Block GitHub writes');
    // Simulating an edit replaces the saved policy: the same policy judged again changes nothing.
    await page.getByRole('button', { name: 'Run simulation' }).click();
    await page.getByTestId('sim-evaluated').waitFor();
    expect(Number(await page.getByTestId('sim-allow-to-deny').textContent())).toBe(0);
    expect(Number(await page.getByTestId('sim-deny-to-allow').textContent())).toBe(0);

    await page.getByRole('button', { name: 'Delete policy' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Yes, delete it' }).click();
    await page.waitForURL(new RegExp(`/policies/${policyId}/versions\\?deleted=1$`));
    await page.getByText('Policy deleted.').waitFor();
    const rows = page.getByRole('table', { name: 'Versions' }).locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(6);
    await expect(rows.first().textContent()).resolves.toMatch(/v6.*delete/s);
    const afterDelete = await apiGet<{ policies: Array<{ id: string }> }>(`/api/agents/${agentId}/policies`);
    expect(afterDelete.policies.some((p) => p.id === policyId)).toBe(false);
    await screenshot('policy-deleted-history');

    await page.getByRole('button', { name: 'Restore v6' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Yes, restore version 6' }).click();
    await page.getByText('Version 6 restored as version 7.').waitFor();
    const afterRestore = await apiGet<{ policies: Array<{ id: string; name: string }> }>(`/api/agents/${agentId}/policies`);
    expect(afterRestore.policies.find((p) => p.id === policyId)?.name).toBe('Block GitHub writes');
  });

  it('logged no console errors but the 400 it provoked on purpose', () => {
    const provoked = consoleErrors.filter((e) => /Failed to load resource.*\b400\b/.test(e));
    expect(provoked.length).toBe(expected4xx);
    expect(consoleErrors.filter((e) => !provoked.includes(e))).toEqual([]);
  });
});
