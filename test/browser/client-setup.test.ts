import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import {
  VIEWPORTS, apiFromPage, axeViolations, horizontalOverflow, launchChromium, openPage, settled, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct,
} from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { serverNameOf as serverName } from '../../web/src/lib/setup/client-snippets.ts';

/**
 * Issue 19, the dashboard's client setup (decision 046): a member who joins lands on the
 * onboarding page, which shows the real external `/mcp` URL and a configuration to copy for
 * each client and both ways in (OAuth, key header with a placeholder), and a first-call check
 * that turns green after a real call through `/mcp` with the member's key (the SDK's client).
 */
const MEMBER = 'setup-member@example.com';
type OpenedPage = Awaited<ReturnType<typeof openPage>>;
/** The page's clipboard, read in `page.evaluate` (the test's tsconfig has no DOM types). */
type InPage = { navigator: { clipboard: { readText(): Promise<string> } } };

describe('the client setup page in a real browser (issue 19)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let agentId = '';
  let agentName = '';
  let mcpUrl = '';

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
    mcpUrl = `${product.baseUrl}/mcp`;
    owner = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await signInThroughPage(owner.page, product.outboxDir, DEMO_OWNER_EMAIL);
    const agents = (await apiFromPage(owner.page, 'GET', '/api/agents')).body as { agents: Array<{ id: string; name: string }> };
    ({ id: agentId, name: agentName } = agents.agents[0]!);
  }, 240_000);
  afterAll(async () => {
    await owner?.context.close();
    await browser?.close();
    await product?.stop();
  });

  it('a member who joins sees their MCP URL and every client snippet with it, copies one, and the first-call check turns green after a real call', async () => {
    const invite = (await apiFromPage(owner.page, 'POST', `/api/agents/${agentId}/invite`, { email: MEMBER })).body as { url: string };
    const member = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await member.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: product.baseUrl });
    const { page, screenshot, consoleErrors } = member;
    await signInThroughPage(page, product.outboxDir, MEMBER);
    await page.goto(new URL(invite.url).pathname + new URL(invite.url).search);
    await page.getByRole('button', { name: 'Ask to join' }).click();

    // Joining lands on onboarding; while pending, the setup is there and the check waits for approval.
    await page.waitForURL(new RegExp(`/agents/${agentId}/onboarding$`));
    await page.getByRole('heading', { name: 'Connect your MCP client' }).waitFor();
    await expect.poll(() => page.getByTestId('first-call').textContent()).toContain('Waiting for approval');

    // The owner approves; the member generates a key (shown once), whose page links back here.
    const members = (await apiFromPage(owner.page, 'GET', `/api/agents/${agentId}/members?status=pending`)).body as { members: Array<{ id: string; email: string }> };
    const memberId = members.members.find((m) => m.email === MEMBER)!.id;
    expect((await apiFromPage(owner.page, 'PUT', `/api/agents/${agentId}/members/${memberId}/status`, { status: 'approved' })).status).toBe(200);
    await page.goto(`/agents/${agentId}/members`);
    await page.getByRole('button', { name: 'Generate key' }).click();
    const key = (await page.getByTestId('copy-value').textContent())!.trim();
    expect(key).toMatch(/^pcm_[A-Za-z0-9_-]{43}$/);
    await page.getByRole('link', { name: 'Set up your MCP client with it' }).click();
    await page.waitForURL(new RegExp(`/agents/${agentId}/onboarding#client-setup$`));

    // The real URL, and each client's snippet for OAuth: the URL only.
    const setup = page.locator('#client-setup');
    await setup.getByTestId('snippet').first().waitFor();
    await expect(setup.getByTestId('snippet').first().locator('pre').textContent()).resolves.toBe(mcpUrl);
    const clients = ['claude-code', 'claude-desktop', 'cursor', 'vscode', 'inspector'];
    expect(await setup.locator('section.client').evaluateAll((s) => s.map((e) => e.getAttribute('data-client')))).toEqual(['claude-code', 'claude-desktop', 'cursor', 'vscode', 'inspector']);
    const snippetsOf = (client: string) => setup.locator(`section.client[data-client="${client}"] pre`).allTextContents();
    for (const client of clients) {
      const texts = await snippetsOf(client);
      expect(texts.join('\n'), client).toContain(mcpUrl);
      expect(texts.join('\n'), client).not.toMatch(/Authorization|pcm_/);
    }
    expect(await snippetsOf('claude-code')).toEqual([`claude mcp add --transport http ${serverName(agentName)} ${mcpUrl}`]);
    expect(JSON.parse((await snippetsOf('vscode'))[0]!)).toEqual({ servers: { [serverName(agentName)]: { type: 'http', url: mcpUrl } } });

    // The key header: a placeholder, never the key just generated.
    await page.getByLabel(/Member key in an Authorization header/).check();
    await setup.getByText('pcm_YOUR_MEMBER_KEY', { exact: true }).first().waitFor();
    for (const client of clients) {
      const texts = (await snippetsOf(client)).join('\n');
      expect(texts, client).toContain(mcpUrl);
      expect(texts, client).toMatch(/Authorization/);
      expect(texts, client).not.toContain(key);
    }
    expect(JSON.parse((await snippetsOf('cursor'))[0]!)).toEqual({ mcpServers: { [serverName(agentName)]: { url: mcpUrl, headers: { Authorization: 'Bearer pcm_YOUR_MEMBER_KEY' } } } });
    expect(await page.locator('body').textContent()).not.toContain(key);

    // A copy button puts exactly the snippet on the clipboard.
    const cursorBlock = setup.locator('section.client[data-client="cursor"] [data-testid="snippet"]').first();
    await cursorBlock.getByRole('button', { name: 'Copy' }).click();
    await cursorBlock.getByText('Copied to the clipboard.').waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as InPage).navigator.clipboard.readText())).toBe(await cursorBlock.locator('pre').textContent());

    // Waiting for the first call…
    const check = page.getByTestId('first-call');
    await expect.poll(() => check.getAttribute('data-state')).toBe('waiting');
    await expect(check.textContent()).resolves.toContain('Waiting for your first call');
    await settled(page);
    expect((await horizontalOverflow(page)).by).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('setup-waiting-1280');

    // …a real call through /mcp with the member's key (the SDK client) turns it green.
    const { client } = await connectMcp(product.baseUrl, key);
    try {
      await client.listTools();
      // The member has connected no service yet: the call is refused, and audited — which is what the check waits for.
      const refused = await client.callTool({ name: 'github__get_me', arguments: {} });
      expect(refused.isError).toBe(true);
    } finally {
      await client.close().catch(() => undefined);
    }
    await expect.poll(() => check.getAttribute('data-state'), { timeout: 20_000 }).toBe('received');
    await expect(check.textContent()).resolves.toMatch(/Your first call arrived\.[\s\S]*github[\s\S]*get_me[\s\S]*denied/);
    await screenshot('setup-first-call-1280');

    // At 390 px: no sideways scroll, axe clean.
    await page.setViewportSize(VIEWPORTS.phone);
    await page.reload();
    await page.locator('#client-setup [data-testid="snippet"]').first().waitFor();
    await expect.poll(() => page.getByTestId('first-call').getAttribute('data-state')).toBe('received');
    await settled(page);
    const overflow = await horizontalOverflow(page);
    expect(overflow.by, overflow.culprits.join(', ')).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('setup-390');
    expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
    await member.context.close();
  });
});

