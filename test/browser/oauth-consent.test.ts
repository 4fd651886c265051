import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { apiFromPage, axeViolations, launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct } from '../support/browser.ts';
import { latestMailTo } from '../support/dashboard-session.ts';

const REDIRECT = 'http://127.0.0.1:33419/callback';
// RFC 7636 appendix B.
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

describe('OAuth consent for an MCP client in a real browser (single process, built dashboard)', () => {
  let product: RunningProduct;
  let browser: Browser;
  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
  });
  afterAll(async () => {
    await browser?.close();
    await product?.stop();
  });

  it('a signed-out member is sent to sign-in and back, sees the client and where it returns, enters the key once and the client gets working tokens; Revoke on the sessions page stops them', async () => {
    const email = 'consent-owner@example.com';
    // The member's agent and key, made through the dashboard's API in a first browser.
    const setup = await openPage(browser, product.baseUrl);
    await signInThroughPage(setup.page, product.outboxDir, email);
    const agentId = (await apiFromPage(setup.page, 'POST', '/api/agents', { name: 'Consent agent' })).body.id as string;
    const memberId = (await apiFromPage(setup.page, 'GET', `/api/agents/${agentId}`)).body.membership.id as string;
    const memberKey = (await apiFromPage(setup.page, 'PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key as string;
    await setup.context.close();

    // The MCP client registers and opens the authorize URL in the member's (signed-out) browser.
    const registered = await fetch(`${product.baseUrl}/oauth/register`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Browser Desktop Client', redirect_uris: [REDIRECT] }),
    });
    const { client_id } = await registered.json() as { client_id: string };
    const authorize = new URL(`${product.baseUrl}/oauth/authorize`);
    for (const [k, v] of Object.entries({ client_id, redirect_uri: REDIRECT, response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256', state: 'xyz' })) authorize.searchParams.set(k, v);

    const { page, consoleErrors, screenshot, context } = await openPage(browser, product.baseUrl);
    let landed: URL | undefined;
    await page.route(`${REDIRECT}**`, async (route) => {
      landed = new URL(route.request().url());
      await route.fulfill({ status: 200, contentType: 'text/plain', body: 'You can close this window.' });
    });
    await page.goto(authorize.href);
    await page.waitForURL(/\/sign-in\?next=%2Foauth%2Fconsent/);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('Sign-in code').waitFor();
    await page.getByLabel('Sign-in code').fill(latestMailTo(product.outboxDir, email).code);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.pathname === '/oauth/consent');

    await expect(page.getByTestId('client-name').textContent()).resolves.toBe('Browser Desktop Client');
    await expect(page.getByTestId('redirect-host').textContent()).resolves.toBe('127.0.0.1:33419');
    await expect(page.getByRole('combobox').inputValue()).resolves.toBe(agentId);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('oauth-consent');

    await page.getByLabel('Your member key for this agent').fill(`pcm_${'B'.repeat(43)}`);
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.getByRole('alert').filter({ hasText: /member key/i }).waitFor();
    await page.getByLabel('Your member key for this agent').fill(memberKey);
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL((url) => url.href.startsWith(REDIRECT));
    expect(landed?.searchParams.get('state')).toBe('xyz');
    const code = landed!.searchParams.get('code')!;

    const token = await fetch(`${product.baseUrl}/oauth/token`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', client_id, code, code_verifier: VERIFIER, redirect_uri: REDIRECT }).toString(),
    });
    expect(token.status).toBe(200);
    const { access_token } = await token.json() as { access_token: string };
    const initialize = () => fetch(`${product.baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser-test', version: '1' } } }),
    });
    expect((await initialize()).status).toBe(200);

    // The sessions page lists the client; Revoke (confirmed) ends it.
    await page.goto(`/agents/${agentId}/sessions`);
    const row = page.locator('tr', { hasText: 'Browser Desktop Client' });
    await row.waitFor();
    await screenshot('oauth-grants');
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No MCP client signed in with OAuth').waitFor();
    expect((await initialize()).status).toBe(401);

    expect(unexpectedConsoleErrors(consoleErrors, '400|401')).toEqual([]);
    await context.close();
  });

  it('another site cannot frame the consent page (clickjacking): the page forbids framing and Chromium refuses to show it in a frame', async () => {
    const consentUrl = `${product.baseUrl}/oauth/consent?request=x`;
    const direct = await fetch(consentUrl);
    expect(direct.status).toBe(200);
    expect(direct.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(direct.headers.get('x-frame-options')).toBe('DENY');

    const { page, context } = await openPage(browser, product.baseUrl);
    await page.route('http://attacker.test/**', (route) => route.fulfill({
      status: 200, contentType: 'text/html',
      body: `<!doctype html><title>waiting</title><iframe src="${consentUrl}" width="800" height="600" onload="document.title='loaded'"></iframe>`,
    }));
    await page.goto('http://attacker.test/');
    await page.waitForFunction("document.title === 'loaded'");
    const framed = page.frames().find((f) => f !== page.mainFrame());
    expect(framed?.url().startsWith(product.baseUrl)).toBe(false);
    await context.close();
  });
});
