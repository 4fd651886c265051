import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { latestMailTo } from '../support/dashboard-session.ts';
import { launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct } from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { sandboxControl } from '../support/oauth-consent.ts';

/**
 * Issue 8's acceptance journey, in Debian Chromium against the product as `npm start` runs it
 * (single process, embedded defaults, sandbox connectors), through the dashboard only — the
 * MCP SDK client plays the agent. Owner and member each have their own browser context.
 */
const OWNER = 'journey-owner@example.com';
const MEMBER = 'journey-member@example.com';
const DENY_MESSAGE = 'Writes to GitHub need an owner this week.';

describe('the owner journey in a real browser', () => {
  let product: RunningProduct;
  let browser: Browser;
  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
  });
  afterAll(async () => {
    await browser?.close();
    await product?.stop();
  });

  it('sign in, create an agent, enable GitHub and set its app, invite; the member joins, is approved, connects, keys up; calls are audited live; a tier forbid with preview and simulation denies the next call; CSV export', async () => {
    const owner = await openPage(browser, product.baseUrl);
    const member = await openPage(browser, product.baseUrl);
    const o = owner.page;
    const m = member.page;

    // 1. The owner signs in; a wrong code first shows the API's message.
    await o.goto('/sign-in');
    await o.getByLabel('E-mail address').fill(OWNER);
    await o.getByRole('button', { name: 'Send me a code' }).click();
    await o.getByLabel('Sign-in code').fill('000000');
    await o.getByRole('button', { name: 'Sign in' }).click();
    await expect(o.getByRole('alert').textContent()).resolves.toMatch(/invalid, already used, or expired/);
    await signInThroughPage(o, product.outboxDir, OWNER);

    // 2. Creates an agent; an invalid name first shows a readable message.
    await o.goto('/agents');
    await o.getByLabel('Name', { exact: true }).fill('   ');
    await o.getByRole('button', { name: 'Create agent' }).click();
    await expect(o.getByRole('alert').textContent()).resolves.toMatch(/name/i);
    await o.getByLabel('Name', { exact: true }).fill('Journey agent');
    await o.getByRole('button', { name: 'Create agent' }).click();
    await o.waitForURL(/\/agents\/[0-9a-f-]{36}$/);
    const agentId = /\/agents\/([0-9a-f-]{36})/.exec(o.url())![1]!;
    await owner.screenshot('journey-1-agent');

    // 3. Enables GitHub and sets its OAuth app (registered with the sandbox provider).
    await o.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Connectors' }).click();
    const github = o.getByRole('region', { name: 'GitHub', exact: true });
    await github.getByRole('checkbox', { name: 'Enable GitHub' }).check();
    const app = await sandboxControl(product.sandboxUrl, 'github/apps', { redirect_uris: [`${product.baseUrl}/api/oauth/callback`], name: 'Journey' });
    await github.locator('summary').click();
    await github.getByLabel('Client ID').fill(app.client_id);
    await github.getByLabel('Client secret').fill(app.client_secret);
    await github.getByRole('button', { name: 'Save credentials' }).click();
    await github.getByText('configured', { exact: true }).waitFor();
    await owner.screenshot('journey-2-connectors');

    // 4. Invites the member.
    await o.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Members' }).click();
    await o.getByLabel('E-mail address to invite').fill(MEMBER);
    await o.getByRole('button', { name: 'Send invite' }).click();
    await expect.poll(() => { try { return latestMailTo(product.outboxDir, MEMBER).link; } catch { return undefined; } }).toMatch(/\/join\?token=/);
    const inviteUrl = latestMailTo(product.outboxDir, MEMBER).link!;
    expect(inviteUrl).toMatch(/\/join\?token=/);

    // 5. The member follows the link, signs in, joins (pending).
    await m.goto(inviteUrl);
    await m.waitForURL(/\/sign-in\?next=/);
    await m.getByLabel('E-mail address').fill(MEMBER);
    await m.getByRole('button', { name: 'Send me a code' }).click();
    await m.getByLabel('Sign-in code').waitFor();
    await expect.poll(() => latestMailTo(product.outboxDir, MEMBER).code).toBeTruthy();
    await m.getByLabel('Sign-in code').fill(latestMailTo(product.outboxDir, MEMBER).code!);
    await m.getByRole('button', { name: 'Sign in' }).click();
    await m.waitForURL(/\/join\?token=/);
    await m.getByRole('button', { name: 'Ask to join' }).click();
    await m.waitForURL(`**/agents/${agentId}/onboarding`);
    await member.screenshot('journey-3-member-pending');

    // 6. The owner approves.
    await o.reload();
    await o.getByRole('row', { name: new RegExp(MEMBER) }).getByRole('button', { name: `Approve ${MEMBER}` }).click();
    await o.getByRole('row', { name: new RegExp(MEMBER) }).getByText('approved', { exact: false }).waitFor();

    // 7. The member generates a key (shown once), then connects GitHub through the sandbox's pages.
    await m.goto(`/agents/${agentId}/members#my-key`);
    await m.getByRole('button', { name: 'Generate key' }).click();
    await m.getByText('This is the only time it is shown').waitFor();
    const memberKey = (await m.getByTestId('copy-value').textContent())!.trim();
    expect(memberKey).toMatch(/^pcm_[A-Za-z0-9_-]{43}$/);
    await m.goto(`/agents/${agentId}/connectors`);
    await m.getByRole('button', { name: 'Connect GitHub' }).click();
    await m.waitForURL((url) => url.href.startsWith(product.sandboxUrl));
    await m.getByLabel('Login').fill('journey-octo');
    await m.getByRole('button', { name: 'Authorize' }).click();
    await m.waitForURL(`${product.baseUrl}/agents/${agentId}/connectors?connected=github`);
    await m.getByRole('status').filter({ hasText: 'Connected to GitHub as journey-octo' }).waitFor();
    await member.screenshot('journey-4-member-connected');

    // 8. The owner watches the audit log live while the agent (MCP SDK client, member key) calls.
    await o.goto('/audit');
    await o.getByRole('button', { name: 'Go live' }).click();
    await o.locator('[data-live-status="live"]').waitFor({ timeout: 10_000 });
    const { client, transport } = await connectMcp(product.baseUrl, memberKey);
    const created = await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'api', title: 'From the journey' } });
    expect(created.isError).toBeFalsy();
    expect(JSON.parse((created.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ identity: { login: 'journey-octo' } });
    await o.locator('tr.entry', { hasText: 'issue_write' }).first().waitFor({ timeout: 5_000 });
    await owner.screenshot('journey-5-audit-live');

    // 9. A forbid on GitHub's write tier: live Cedar preview, simulation on the traffic above, saved disabled.
    await o.goto(`/agents/${agentId}/policies/new`);
    await o.locator('input[name="name"]').fill('No GitHub writes');
    await expect.poll(() => o.locator('select[name="service"]').inputValue()).toBe('github');
    await o.getByLabel('Select whole write tier').check();
    await o.locator('textarea[name="denyMessage"]').fill(DENY_MESSAGE);
    await o.locator('input[name="enabled"]').uncheck();
    await expect.poll(() => o.getByTestId('preview-state').textContent(), { timeout: 10_000 }).toBe('Compiles');
    await expect(o.locator('pre').filter({ hasText: 'forbid' }).first().textContent()).resolves.toContain('GithubMCP::Action::"issue_write"');
    await o.getByRole('button', { name: 'Run simulation' }).click();
    await o.getByTestId('sim-evaluated').waitFor();
    expect(Number(await o.getByTestId('sim-allow-to-deny').textContent())).toBe(1);
    await owner.screenshot('journey-6-policy-simulated');
    await o.getByRole('button', { name: 'Create policy' }).click();
    await o.waitForURL(/\/policies\/[0-9a-f-]{36}\?created=1$/);

    // 10. Enables it from the list; the next call is denied with the message.
    await o.goto(`/agents/${agentId}/policies`);
    const row = o.locator('tr[data-policy-key="no-github-writes"]');
    await row.getByRole('switch').click();
    await row.getByText('On').waitFor();
    await owner.screenshot('journey-7-policy-enabled');
    let denied: { isError?: boolean; content: Array<{ text: string }> } | undefined;
    for (let i = 0; i < 20; i++) { // the gateway picks the new policy version up within moments
      denied = await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'api', title: 'Must be denied' } }) as typeof denied;
      if (denied!.isError) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(denied!.isError).toBe(true);
    expect(denied!.content[0]!.text).toBe(DENY_MESSAGE);
    await transport.terminateSession().catch(() => undefined);
    await client.close();

    // 11. The denial is in the audit log with its message; the CSV export has it too.
    // The audit writer batches (up to AUDIT_BATCH_MAX_WAIT_MS): reload until the entry is stored.
    await expect.poll(async () => {
      await o.goto('/audit?result=DENY');
      return o.locator('tr.entry', { hasText: DENY_MESSAGE }).first().waitFor({ timeout: 1_000 }).then(() => true, () => false);
    }, { timeout: 10_000 }).toBe(true);
    await owner.screenshot('journey-8-audit-denied');
    await o.goto('/audit');
    await o.locator('tr.entry').first().waitFor();
    await o.getByRole('button', { name: 'Export all matching' }).click();
    const save = o.getByRole('link', { name: /^Save portcullis-audit-.*\.csv$/ });
    await save.waitFor({ timeout: 15_000 });
    const [download] = await Promise.all([o.waitForEvent('download'), save.click()]);
    const csv = readFileSync((await download.path())!, 'utf8');
    const [header, ...lines] = csv.split(/\r?\n/).filter(Boolean);
    expect(header).toBe('timestamp,agent,member,tool,service,resource,decision,reason,duration,matched_policy_ids');
    expect(lines.some((l) => l.includes('issue_write') && l.includes('DENY') && l.includes(DENY_MESSAGE) && l.includes('no-github-writes'))).toBe(true);
    expect(lines.some((l) => l.includes('issue_write') && l.includes('ALLOW'))).toBe(true);
    await owner.screenshot('journey-9-export');

    expect(unexpectedConsoleErrors(owner.consoleErrors)).toEqual([]);
    expect(unexpectedConsoleErrors(member.consoleErrors)).toEqual([]);
    await owner.context.close();
    await member.context.close();
  }, 180_000);
});
