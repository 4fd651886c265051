import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { latestMailTo } from '../support/dashboard-session.ts';
import { apiFromPage, launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct } from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { sandboxControl } from '../support/oauth-consent.ts';

type OpenedPage = Awaited<ReturnType<typeof openPage>>;

const OWNER = 'agents-owner@example.com';
const MEMBER = 'agents-member@example.com';
const STRANGER = 'someone-else@example.com';
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

describe('agent pages in a real browser: create, connectors, members, keys, joining, connecting through the sandbox', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let member: OpenedPage;
  let agentId = '';
  let inviteUrl = '';
  let strangerInviteUrl = '';
  let memberKey = '';

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
    owner = await openPage(browser, product.baseUrl);
    member = await openPage(browser, product.baseUrl);
  });
  afterAll(async () => {
    await owner?.context.close();
    await member?.context.close();
    await browser?.close();
    await product?.stop();
  });

  it('the owner sees an empty list, creates an agent and lands on its overview', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await signInThroughPage(page, product.outboxDir, OWNER);
    await page.goto('/agents'); // sign-in lands on the home overview
    await page.getByText('You have no agents yet').waitFor();
    await screenshot('agents-empty');

    // A blank name passes the browser's `required` but not the API: its message is shown, with the field.
    await page.getByLabel('Name', { exact: true }).fill('   ');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/^Name must not be empty\.$/);
    await screenshot('agents-create-invalid');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0), '400')).toEqual([]);

    await page.getByLabel('Name', { exact: true }).fill('Support bot');
    await page.getByLabel('Tags').fill('support, beta');
    await page.getByLabel('Type').selectOption('standard');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.waitForURL(new RegExp(`/agents/${UUID}$`));
    agentId = new URL(page.url()).pathname.split('/')[2]!;

    await page.getByRole('heading', { level: 1, name: 'Support bot' }).waitFor();
    const tabs = page.getByRole('navigation', { name: 'Agent sections' });
    expect(await tabs.getByRole('link').allTextContents()).toEqual(['Overview', 'Connectors', 'Members', 'Policies', 'Approvals', 'Audit sinks', 'Sessions', 'Onboarding']);
    await expect(tabs.getByRole('link', { name: 'Overview' }).getAttribute('aria-current')).resolves.toBe('page');
    await page.getByText('No calls in this period').waitFor();
    await screenshot('agent-overview-new');
    expect(consoleErrors).toEqual([]);
  });

  it('the owner enables GitHub and sets its OAuth app credentials; secrets are never shown back', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Connectors' }).click();
    await page.waitForURL(`**/agents/${agentId}/connectors`);
    const cards = page.locator('section.connector');
    await cards.first().waitFor();
    expect(await cards.count()).toBe(16);

    const github = page.getByRole('region', { name: 'GitHub', exact: true });
    const enable = github.getByRole('checkbox', { name: 'Enable GitHub' });
    await enable.check();
    await expect.poll(async () => (await apiFromPage(page, 'GET', `/api/agents/${agentId}`)).body.allowedServices).toEqual(['github']);
    await expect(enable.isChecked()).resolves.toBe(true);

    // Slack accepts a webhook secret; GitHub does not, so its form has no such field.
    await page.getByRole('region', { name: 'Slack', exact: true }).locator('summary').click();
    await page.getByRole('region', { name: 'Slack', exact: true }).getByLabel('Webhook secret (optional)').waitFor();

    const app = await sandboxControl(product.sandboxUrl, 'github/apps', { redirect_uris: [`${product.baseUrl}/api/oauth/callback`], name: 'Browser test' });
    await github.locator('summary').click();
    await expect(github.getByLabel('Webhook secret (optional)').count()).resolves.toBe(0);
    await github.getByLabel('Client ID').fill(app.client_id);
    await github.getByLabel('Client secret').fill(app.client_secret);
    await github.getByRole('button', { name: 'Save credentials' }).click();
    await github.getByText('GitHub credentials saved.').waitFor();
    await github.getByText('configured', { exact: true }).waitFor();
    await screenshot('agent-connectors-owner');

    await page.reload();
    await page.getByRole('region', { name: 'GitHub', exact: true }).getByText('configured', { exact: true }).waitFor();
    expect(await page.content()).not.toContain(app.client_secret);
    expect(consoleErrors).toEqual([]);
  });

  it('the owner invites two addresses and sees each invite link to copy', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Members' }).click();
    await page.waitForURL(`**/agents/${agentId}/members`);
    await page.getByRole('cell', { name: `${OWNER} (you)` }).waitFor();

    const send = async (email: string) => {
      await page.getByLabel('E-mail address to invite').fill(email);
      await page.getByRole('button', { name: 'Send invite' }).click();
      await page.getByText(`We e-mailed an invite to ${email}`).waitFor();
      return (await page.getByTestId('copy-value').textContent())!.trim();
    };
    strangerInviteUrl = await send(STRANGER);
    inviteUrl = await send(MEMBER);
    expect(inviteUrl).toMatch(new RegExp(`^${product.baseUrl}/join\\?token=`));
    expect(latestMailTo(product.outboxDir, MEMBER).link).toBe(inviteUrl);
    await screenshot('agent-members-invite');
    expect(consoleErrors).toEqual([]);
  });

  it('the member opens the invite signed out, signs in, and is brought back to the invite', async () => {
    const { page, screenshot, consoleErrors } = member;
    await page.goto(inviteUrl);
    await page.waitForURL(/\/sign-in\?next=%2Fjoin%3Ftoken%3D/);
    await page.getByLabel('E-mail address').fill(MEMBER);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('Sign-in code').waitFor();
    await page.getByLabel('Sign-in code').fill(latestMailTo(product.outboxDir, MEMBER).code);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/join\?token=/);
    await page.getByText(`You were invited to join an agent on Portcullis as ${MEMBER}`).waitFor();
    await screenshot('join-invite');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0), '401')).toEqual([]);
  });

  it('an invite for another address shows the API\'s readable message', async () => {
    const { page, screenshot, consoleErrors } = member;
    await page.goto(strangerInviteUrl);
    await page.getByText(`This invite works only for ${STRANGER}`).waitFor();
    await page.getByRole('button', { name: 'Ask to join' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/different e-mail address.*sign in with the invited address/);
    await screenshot('join-mismatched-email');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0), '403')).toEqual([]);
  });

  it('the member joins with their own invite and sees the onboarding checklist awaiting approval', async () => {
    const { page, screenshot, consoleErrors } = member;
    await page.goto(inviteUrl);
    await page.getByRole('button', { name: 'Ask to join' }).click();
    await page.waitForURL(`**/agents/${agentId}/onboarding`);
    await page.getByText('Next step: Wait for an owner to approve your membership.').waitFor();
    const tabs = page.getByRole('navigation', { name: 'Agent sections' });
    expect(await tabs.getByRole('link').allTextContents()).toEqual(['Overview', 'Connectors', 'Members', 'Onboarding']);
    await screenshot('onboarding-pending');
    expect(consoleErrors).toEqual([]);
  });

  it('the owner approves the pending member', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.reload();
    const row = page.getByRole('row', { name: new RegExp(MEMBER) });
    await row.getByText('pending').waitFor();
    await screenshot('agent-members-pending');
    await row.getByRole('button', { name: `Approve ${MEMBER}` }).click();
    await page.getByText(`${MEMBER} approved.`).waitFor();
    await row.getByText('approved', { exact: true }).waitFor();
    await screenshot('agent-members-approved');
    expect(consoleErrors).toEqual([]);
  });

  it('the member generates a key that is shown once, with a copy button and a warning', async () => {
    const { page, screenshot, consoleErrors, context } = member;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: product.baseUrl });
    await page.reload();
    await page.getByText('Next step: Generate your member key.').waitFor();
    await page.getByRole('link', { name: 'Generate your key' }).click();
    await page.waitForURL(new RegExp(`/agents/${agentId}/members#my-key$`));
    await page.getByRole('button', { name: 'Generate key' }).click();
    await page.getByText('This is the only time it is shown').waitFor();
    memberKey = (await page.getByTestId('copy-value').textContent())!.trim();
    expect(memberKey).toMatch(/^pcm_[A-Za-z0-9_-]{43}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    // The page's own clipboard (a DOM API: the test's tsconfig has no DOM types, hence the string).
    await expect(page.evaluate('navigator.clipboard.readText()')).resolves.toBe(memberKey);
    await page.getByText(`Current key: …${memberKey.slice(-4)}`).waitFor();
    await screenshot('member-key-shown-once');

    await page.getByRole('button', { name: 'I have saved my key' }).click();
    await page.reload();
    await page.getByRole('button', { name: 'Rotate key' }).waitFor();
    expect(await page.content()).not.toContain(memberKey);
    expect(consoleErrors).toEqual([]);
  });

  it('the member connects GitHub through the sandbox\'s consent page and lands back with a notice', async () => {
    const { page, screenshot, consoleErrors } = member;
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Connectors' }).click();
    await page.waitForURL(`**/agents/${agentId}/connectors`);
    // A member sees only the enabled connectors, without the owner's controls.
    await page.getByRole('region', { name: 'GitHub', exact: true }).waitFor();
    expect(await page.locator('section.connector').count()).toBe(1);
    expect(await page.getByRole('main').getByRole('checkbox').count()).toBe(0);
    await screenshot('member-connectors-before');

    // Cancelling on the provider's page comes back with a readable error.
    await page.getByRole('button', { name: 'Connect GitHub' }).click();
    await page.waitForURL((url) => url.href.startsWith(product.sandboxUrl));
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.waitForURL(/\/connectors\?.*connect_error=access_denied/);
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/Connecting GitHub did not finish: you cancelled/);
    await screenshot('member-connectors-cancelled');

    await page.getByRole('button', { name: 'Connect GitHub' }).click();
    await page.waitForURL((url) => url.href.startsWith(product.sandboxUrl));
    await page.getByLabel('Login').fill('octo-member');
    await page.getByLabel('Name (optional)').fill('Octo Member');
    await screenshot('sandbox-consent');
    await page.getByRole('button', { name: 'Authorize' }).click();
    await page.waitForURL(`${product.baseUrl}/agents/${agentId}/connectors?connected=github`);
    await page.getByRole('status').filter({ hasText: 'Connected to GitHub as octo-member' }).waitFor();
    await page.getByText('You are connected as octo-member.').waitFor();
    await screenshot('member-connectors-connected');

    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Onboarding' }).click();
    await page.getByText('Next step: You are ready').waitFor();
    await screenshot('onboarding-ready');
    expect(consoleErrors).toEqual([]);
  });

  it('the overview charts the agent\'s calls and lists recent denies; the owner toggles the status', async () => {
    // A forbid policy (made through the API: the policy pages are another slice), then two calls.
    const policy = await apiFromPage(owner.page, 'POST', `/api/agents/${agentId}/policies`, {
      name: 'No team listing', service: 'github', effect: 'forbid', tools: ['get_teams'], principal: { type: 'all_members' }, denyMessage: 'Team listing is off limits',
    });
    expect(policy.status).toBe(201);
    const { client } = await connectMcp(product.baseUrl, memberKey);
    try {
      await client.callTool({ name: 'github__get_me', arguments: {} });
      const denied = await client.callTool({ name: 'github__get_teams', arguments: {} });
      expect(denied.isError).toBe(true);
    } finally {
      await client.close();
    }

    const { page, screenshot, consoleErrors } = owner;
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Overview' }).click();
    await page.waitForURL(new RegExp(`/agents/${agentId}$`));
    // The audit service stores entries asynchronously: wait until both are queryable, then load the page.
    await expect.poll(async () => (await apiFromPage(page, 'GET', '/api/audit?agent=Support%20bot')).body.total, { timeout: 60_000, interval: 500 }).toBe(2);
    await page.reload();
    await page.getByRole('cell', { name: /Team listing is off limits/ }).waitFor();
    await page.getByRole('img', { name: /Calls to Support bot, last 7 days.*1 allowed and 1 denied calls/ }).waitFor();
    expect(await page.locator('dl.totals dd').allTextContents()).toEqual(['2', '1', '1', '1']);
    await screenshot('agent-overview-activity');

    await page.getByRole('button', { name: 'Disable agent' }).click();
    await page.getByRole('dialog', { name: /^Disable / }).getByRole('button', { name: 'Disable agent' }).click(); // confirmed first (issue 18)
    await page.locator('.facts').getByText('Disabled').waitFor();
    await page.getByRole('button', { name: 'Enable agent' }).click();
    await page.locator('.facts').getByText('Active').waitFor();
    expect(consoleErrors).toEqual([]);
  });

  it('the member rotates the key keeping connections, resets nothing lost, revokes it, and disconnects GitHub', async () => {
    const { page, screenshot, consoleErrors } = member;
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`/agents/${agentId}/members`);
    await page.getByLabel('Current key (optional)').fill(memberKey);
    await page.getByRole('button', { name: 'Rotate key' }).click();
    await page.getByText('This is the only time it is shown').waitFor();
    const rotated = (await page.getByTestId('copy-value').textContent())!.trim();
    expect(rotated).toMatch(/^pcm_[A-Za-z0-9_-]{43}$/);
    expect(rotated).not.toBe(memberKey);
    const myRow = page.getByRole('row', { name: new RegExp(`${MEMBER} \\(you\\)`) });
    await myRow.getByText(`…${rotated.slice(-4)}`).waitFor();
    await myRow.getByText('github', { exact: true }).waitFor();

    await page.getByText('Lost your key?').click();
    await page.getByRole('button', { name: 'Reset lost key' }).click();
    await page.getByText('Nothing to clear: your key opens all your connections.').waitFor();
    await screenshot('member-key-rotated');

    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.getByText('Your key was revoked.').waitFor();
    await page.getByRole('button', { name: 'Generate key' }).waitFor();

    await page.goto(`/agents/${agentId}/connectors`);
    await page.getByRole('button', { name: 'Disconnect GitHub' }).click();
    await page.getByText('Disconnected from GitHub.').waitFor();
    await page.getByRole('button', { name: 'Connect GitHub' }).waitFor();
    expect(consoleErrors).toEqual([]);
  });

  it('the member\'s overview has no owner settings; the owner edits name and tags', async () => {
    await member.page.goto(`/agents/${agentId}`);
    await member.page.getByRole('heading', { name: 'Activity' }).waitFor();
    expect(await member.page.getByRole('heading', { name: 'Settings' }).count()).toBe(0);
    await member.screenshot('agent-overview-member');

    const { page, consoleErrors } = owner;
    await page.getByRole('button', { name: 'Edit name and tags' }).click();
    await page.getByLabel('Agent name').fill('Support bot EU');
    await page.getByLabel('Tags (comma-separated)').fill('support, eu');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Support bot EU' }).waitFor();
    expect(consoleErrors).toEqual([]);
    expect(member.consoleErrors).toEqual([]);
  });

  it('the agents list keeps search, filters, sorting and paging in the URL', async () => {
    const { page, screenshot, consoleErrors } = owner;
    for (const name of ['Alpha tools', 'Beta tools']) {
      const made = await apiFromPage(page, 'POST', '/api/agents', { name, tags: ['tools'] });
      expect(made.status).toBe(201);
    }
    await page.goto('/agents');
    await page.getByRole('link', { name: 'Support bot EU' }).waitFor();
    expect(await page.locator('tbody tr').count()).toBe(3);

    await page.getByRole('button', { name: /^Name/ }).click();
    await page.waitForURL(/sortBy=name&sortDir=asc/);
    // The URL changes before the rows re-render: poll, as the other list assertions here do.
    await expect.poll(() => page.locator('tbody tr td:first-child a').allTextContents()).toEqual(['Alpha tools', 'Beta tools', 'Support bot EU']);
    await expect.poll(() => page.getByRole('columnheader', { name: /Name/ }).getAttribute('aria-sort')).toBe('ascending');

    await page.getByRole('searchbox', { name: 'Search' }).fill('tools');
    await page.getByRole('searchbox', { name: 'Search' }).press('Enter');
    await page.waitForURL(/search=tools/);
    await expect.poll(() => page.locator('tbody tr').count()).toBe(2);

    await page.getByLabel('Per page').selectOption('10');
    await page.waitForURL(/limit=10/);
    await page.getByText('Showing 1–2 of 2').waitFor();

    await page.getByLabel('Role').selectOption('member');
    await page.waitForURL(/role=member/);
    await page.getByText('No agents match these filters').waitFor();
    await screenshot('agents-filtered-empty');

    // The URL alone restores the list (a reload, a shared link).
    await page.goto('/agents?sortBy=name&sortDir=desc&limit=10&offset=1');
    await expect.poll(() => page.locator('tbody tr td:first-child a').allTextContents()).toEqual(['Beta tools', 'Alpha tools']);
    await page.getByText('Showing 2–3 of 3').waitFor();
    await screenshot('agents-list');
    expect(consoleErrors).toEqual([]);
  });

  it('an agent that does not exist (or is not visible) shows the product\'s 404 page', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.goto('/agents/00000000-0000-4000-8000-000000000000/members');
    await page.getByRole('heading', { name: 'This agent does not exist' }).waitFor();
    expect(await page.getByRole('navigation', { name: 'Agent sections' }).count()).toBe(0);
    await screenshot('agent-not-found');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0), '404')).toEqual([]);
    await page.goto('/agents');
  });

  it('the owner deletes an agent after confirming its name', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.getByRole('link', { name: 'Beta tools' }).click();
    await page.getByRole('heading', { level: 1, name: 'Beta tools' }).waitFor();
    await page.getByRole('button', { name: 'Delete agent…' }).click();
    const confirm = page.getByRole('button', { name: 'Delete this agent' });
    await expect(confirm.isDisabled()).resolves.toBe(true);
    await page.getByLabel(/Type the agent's name/).fill('Beta tools');
    await screenshot('agent-delete-confirm');
    await confirm.click();
    await page.waitForURL(/\/agents$/);
    await page.getByRole('link', { name: 'Alpha tools' }).waitFor();
    expect(await page.getByRole('link', { name: 'Beta tools' }).count()).toBe(0);
    expect(consoleErrors).toEqual([]);
  });
});
