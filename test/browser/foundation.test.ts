import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { generate } from 'otplib';
import {
  apiFromPage, axeViolations, horizontalOverflow, launchChromium, openPage, settled, signInThroughPage, startProduct,
  unexpectedConsoleErrors, VIEWPORTS, type InPage, type RunningProduct,
} from '../support/browser.ts';
import { latestMailTo } from '../support/dashboard-session.ts';

/**
 * Issue 18, the dashboard's foundation (items 4–7): every page at 1280×800 and 390×844 without
 * sideways scrolling and with no serious or critical axe violation, screenshots of each
 * (`test-artifacts/screenshots/foundation-*`), dark mode, the guards (MFA pending, 401 mid-session,
 * 403/404 pages), readable field errors, the confirm dialog and the disabled-agent banner.
 */
const OWNER = 'foundation-owner@example.com';
const MFA_USER = 'foundation-mfa@example.com';
const INVITEE = 'foundation-invitee@example.com';
const FLOODED = 'foundation-flooded@example.com';

type OpenedPage = Awaited<ReturnType<typeof openPage>>;

/** Fills the sign-in form on the page as it is (keeping its `next=`), reading the code from the outbox. */
async function signInHere(page: Page, outboxDir: string, email: string): Promise<void> {
  await page.getByLabel('E-mail address').fill(email);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('Sign-in code').waitFor();
  await page.getByLabel('Sign-in code').fill(latestMailTo(outboxDir, email).code!);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

describe('the dashboard foundation in a real browser (issue 18: guards, states, responsive, design system)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let agentId = '';
  let policyId = '';
  let inviteUrl = '';

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
    owner = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await signInThroughPage(owner.page, product.outboxDir, OWNER);
    const p = owner.page;
    const agent = await apiFromPage(p, 'POST', '/api/agents', { name: 'Foundation agent with a rather long name for narrow screens', tags: ['ops', 'prod'] });
    agentId = agent.body.id;
    await apiFromPage(p, 'PUT', `/api/agents/${agentId}/services`, { services: ['github', 'slack'] });
    const policy = await apiFromPage(p, 'POST', `/api/agents/${agentId}/policies`, {
      name: 'No destructive GitHub calls', service: 'github', effect: 'forbid', tiers: ['destructive'], principal: { type: 'all_members' }, denyMessage: 'Destructive GitHub calls need an owner.',
    });
    policyId = policy.body.id;
    inviteUrl = (await apiFromPage(p, 'POST', `/api/agents/${agentId}/invite`, { email: INVITEE })).body.url;
  });
  afterAll(async () => {
    await owner?.context.close();
    await browser?.close();
    await product?.stop();
  });

  it('every page fits 390 px without sideways scrolling, has no serious or critical axe violation, and is screenshotted at both sizes and in dark mode', async () => {
    const pages: Array<{ name: string; path: string; ready?: (page: Page) => Promise<unknown> }> = [
      { name: 'home', path: '/' },
      { name: 'agents', path: '/agents' },
      { name: 'agent-overview', path: `/agents/${agentId}` },
      { name: 'agent-connectors', path: `/agents/${agentId}/connectors` },
      { name: 'agent-members', path: `/agents/${agentId}/members` },
      { name: 'agent-policies', path: `/agents/${agentId}/policies` },
      { name: 'policy-new', path: `/agents/${agentId}/policies/new` },
      { name: 'policy-edit', path: `/agents/${agentId}/policies/${policyId}` },
      { name: 'policy-versions', path: `/agents/${agentId}/policies/${policyId}/versions` },
      { name: 'agent-sessions', path: `/agents/${agentId}/sessions` },
      { name: 'agent-onboarding', path: `/agents/${agentId}/onboarding` },
      { name: 'audit', path: '/audit' },
      { name: 'account', path: '/account' },
      { name: 'join', path: new URL(inviteUrl).pathname + new URL(inviteUrl).search },
      { name: 'not-found', path: '/no-such-page' },
      { name: 'agent-not-found', path: '/agents/00000000-0000-4000-8000-000000000000' },
    ];
    const problems: string[] = [];
    const check = async (opened: OpenedPage, name: string, path: string, size: keyof typeof VIEWPORTS | 'dark') => {
      const { page } = opened;
      await page.goto(path);
      await settled(page);
      const overflow = await horizontalOverflow(page);
      if (size === 'phone' && overflow.by > 0) problems.push(`${name} @390: scrolls sideways by ${overflow.by}px: ${overflow.culprits.join(', ')}`);
      for (const violation of await axeViolations(page)) problems.push(`${name} @${size}: axe ${violation}`);
      await opened.screenshot(`foundation-${name}-${size === 'dark' ? 'dark' : VIEWPORTS[size].width}`);
    };

    for (const { name, path } of pages) await check(owner, name, path, 'desktop');
    const phone = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    await phone.context.addCookies(await owner.context.cookies());
    for (const { name, path } of pages) await check(phone, name, path, 'phone');
    const dark = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop, colorScheme: 'dark' });
    await dark.context.addCookies(await owner.context.cookies());
    for (const { name, path } of pages) await check(dark, name, path, 'dark');

    // Signed out: the sign-in page at both sizes.
    const signedOut = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    await check(signedOut, 'sign-in', '/sign-in', 'phone');
    await signedOut.page.setViewportSize(VIEWPORTS.desktop);
    await check(signedOut, 'sign-in', '/sign-in', 'desktop');

    expect(problems).toEqual([]);
    for (const opened of [owner, phone, dark, signedOut]) expect(unexpectedConsoleErrors(opened.consoleErrors)).toEqual([]);
    await Promise.all([phone.context.close(), dark.context.close(), signedOut.context.close()]);
  }, 300_000);

  it('at 390 px the navigation folds behind a menu button that reaches Sign out; agent tabs scroll inside themselves', async () => {
    const phone = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    await phone.context.addCookies(await owner.context.cookies());
    const { page } = phone;
    await page.goto(`/agents/${agentId}/policies`);
    await settled(page);
    await expect(page.getByRole('button', { name: 'Sign out' }).isVisible()).resolves.toBe(false);
    await page.getByRole('button', { name: 'Menu' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor({ state: 'visible' });
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).waitFor({ state: 'visible' });
    await phone.screenshot('foundation-menu-open-390');
    const tabs = await page.getByRole('navigation', { name: 'Agent sections' }).evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth, overflowX: (globalThis as unknown as InPage).getComputedStyle(el).overflowX }));
    expect(tabs.overflowX).toBe('auto');
    expect(await page.evaluate(() => (globalThis as unknown as InPage).document.scrollingElement!.scrollWidth)).toBeLessThanOrEqual(390);
    await phone.context.close();
  });

  it('while MFA is pending only the MFA step is reachable: no navigation, every page redirects to it, field errors are readable, the code lands on the page asked for', async () => {
    const { page, context, consoleErrors, screenshot } = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    await signInThroughPage(page, product.outboxDir, MFA_USER);
    const setup = await apiFromPage(page, 'POST', '/api/auth/mfa/setup');
    const enrolled = await apiFromPage(page, 'POST', '/api/auth/mfa/verify-setup', { code: await generate({ secret: setup.body.secret }) });
    expect(enrolled.status).toBe(200);
    await apiFromPage(page, 'POST', '/api/auth/logout');

    // Signing in again: the code step is followed by the MFA step, and nothing else.
    await page.goto('/agents');
    await page.waitForURL(/\/sign-in\?next=%2Fagents/);
    await signInHere(page, product.outboxDir, MFA_USER);
    await page.waitForURL(/\/sign-in\?step=mfa/);
    await page.getByLabel('Authenticator code').waitFor();
    expect(await page.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
    for (const path of ['/agents', '/audit', '/account', `/agents/${agentId}`, '/']) {
      await page.goto(path);
      await page.waitForURL(/\/sign-in\?step=mfa/);
      await page.getByLabel('Authenticator code').waitFor();
      expect(await page.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
    }
    expect((await apiFromPage(page, 'GET', '/api/agents')).status).toBe(403);

    // A malformed code: the field's own message, not the API's validation text.
    await page.getByLabel('Authenticator code').fill('12ab');
    await page.getByRole('button', { name: 'Verify' }).click();
    const fieldError = page.locator('#mfa-error');
    await fieldError.waitFor();
    expect(await fieldError.textContent()).toMatch(/^Code must be the 6 digits from the authenticator app\.$/);
    expect(await page.locator('body').textContent()).not.toMatch(/Invalid body field|\/api\//);
    await screenshot('foundation-mfa-pending-390');

    // A backup code (the authenticator's current code was spent on enrolment).
    await page.getByRole('button', { name: 'Use a backup code' }).click();
    await page.getByLabel('Backup code').fill(enrolled.body.backupCodes[0]);
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.waitForURL((url) => url.pathname === '/');
    await page.getByRole('button', { name: 'Menu' }).waitFor();
    expect(unexpectedConsoleErrors(consoleErrors, '40[03]')).toEqual([]);
    await context.close();
  });

  it('a session that ends mid-way returns to sign-in and, after signing in, to the same page', async () => {
    const { page, context, consoleErrors, screenshot } = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await signInThroughPage(page, product.outboxDir, OWNER);
    await page.goto(`/agents/${agentId}/policies`);
    await page.locator(`tr[data-policy-key]`).first().waitFor();
    // The session ends elsewhere (signed out on another device): the next call answers 401.
    const sessions = await apiFromPage(page, 'GET', '/api/users/me/sessions');
    const mine = sessions.body.sessions.find((s: { current: boolean }) => s.current);
    expect((await apiFromPage(page, 'DELETE', `/api/users/me/sessions/${mine.id}`)).status).toBe(204);

    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Members' }).click();
    await page.waitForURL((url) => url.pathname === '/sign-in' && url.searchParams.get('next') === `/agents/${agentId}/members`);
    await screenshot('foundation-session-ended');
    await signInHere(page, product.outboxDir, OWNER);
    await page.waitForURL((url) => url.pathname === `/agents/${agentId}/members`);
    await page.getByRole('heading', { name: /Members/ }).first().waitFor();
    expect(unexpectedConsoleErrors(consoleErrors, '401')).toEqual([]);
    await context.close();
  });

  it('a rate-limited request says so in words, counts down from Retry-After and shows the request id', async () => {
    const { page, context, consoleErrors, screenshot } = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    await page.goto('/sign-in');
    // Five codes per address per window (RATE_LIMIT_MAGIC_LINK_PER_ADDRESS): the sixth is refused.
    for (let i = 0; i < 5; i++) {
      await page.getByLabel('E-mail address').fill(FLOODED);
      await page.getByRole('button', { name: 'Send me a code' }).click();
      await page.getByLabel('Sign-in code').waitFor();
      await page.getByRole('button', { name: 'Use another address' }).click();
    }
    await page.getByLabel('E-mail address').fill(FLOODED);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByTestId('retry-countdown').waitFor();
    expect(await page.getByTestId('error-message').locator('.message').textContent()).toBe('Too many attempts.');
    expect(await page.getByTestId('retry-countdown').textContent()).toMatch(/^You can try again in \d+ (s|min)\.$/);
    expect(await page.getByTestId('request-id').textContent()).toMatch(/^[0-9a-f-]{36}$/);
    await screenshot('foundation-rate-limited-390');
    expect(unexpectedConsoleErrors(consoleErrors, '429')).toEqual([]);
    await context.close();
  });

  it('unknown pages and agents get the product\'s 404 page, never an API path or a framework default', async () => {
    const { page } = owner;
    await page.goto('/no-such-page');
    await page.getByTestId('problem-page').waitFor();
    await page.getByRole('heading', { name: 'This page does not exist' }).waitFor();
    await page.goto('/agents/00000000-0000-4000-8000-000000000000');
    await page.getByRole('heading', { name: 'This agent does not exist' }).waitFor();
    await page.goto('/agents/not-a-uuid/policies');
    await page.getByRole('heading', { name: 'This agent does not exist' }).waitFor();
    expect(await page.locator('main').textContent()).not.toMatch(/\/api\/|No route for|Invalid params/);
  });

  it('the policy editor asks before leaving unsaved changes; turning a forbid policy off is confirmed', async () => {
    const { page, screenshot } = owner;
    await page.goto(`/agents/${agentId}/policies/${policyId}`);
    const name = page.locator('input[name="name"]');
    await name.waitFor();
    await name.fill('No destructive GitHub calls, edited');
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Members' }).click();
    const leave = page.getByRole('dialog', { name: 'Leave without saving?' });
    await leave.waitFor();
    await screenshot('foundation-unsaved-changes');
    await leave.getByRole('button', { name: 'Stay on this page' }).click();
    await leave.waitFor({ state: 'hidden' });
    expect(new URL(page.url()).pathname).toBe(`/agents/${agentId}/policies/${policyId}`);
    expect(await name.inputValue()).toBe('No destructive GitHub calls, edited');
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Members' }).click();
    await leave.getByRole('button', { name: 'Leave without saving' }).click();
    await page.waitForURL((url) => url.pathname === `/agents/${agentId}/members`);

    await page.goto(`/agents/${agentId}/policies`);
    const toggle = page.locator('tr[data-policy-key]').first().getByRole('switch');
    await toggle.click();
    const turnOff = page.getByRole('dialog', { name: /^Turn off/ });
    await turnOff.getByRole('button', { name: 'Cancel' }).click();
    expect(await toggle.isChecked()).toBe(true);
  });

  it('disabling an agent asks first in the one confirm dialog; while disabled every agent page shows a banner', async () => {
    const { page, screenshot } = owner;
    await page.goto(`/agents/${agentId}`);
    await page.getByRole('button', { name: 'Disable agent' }).click();
    const dialog = page.getByRole('dialog', { name: /^Disable / });
    await dialog.waitFor();
    await screenshot('foundation-confirm-disable');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    expect((await apiFromPage(page, 'GET', `/api/agents/${agentId}`)).body.status).toBe('active');

    await page.getByRole('button', { name: 'Disable agent' }).click();
    await dialog.getByRole('button', { name: 'Disable agent' }).click();
    await page.getByTestId('agent-disabled-banner').waitFor();
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Connectors' }).click();
    await page.getByTestId('agent-disabled-banner').waitFor();
    await screenshot('foundation-agent-disabled');
    await page.goto(`/agents/${agentId}`);
    await page.getByRole('button', { name: 'Enable agent' }).click(); // enabling needs no confirmation
    await page.getByTestId('agent-disabled-banner').waitFor({ state: 'detached' });
  });
});

describe('MFA enrolment pending (MFA_REQUIRED=all): only the enrolment step is reachable (issue 18 item 4)', () => {
  const ENROLEE = 'foundation-enrolee@example.com';
  let product: RunningProduct;
  let browser: Browser;

  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct({ MFA_REQUIRED: 'all' }), launchChromium()]);
  });
  afterAll(async () => {
    await browser?.close();
    await product?.stop();
  });

  it('a user who must set up MFA sees only the enrolment step, on every page, until it is done; then the whole dashboard', async () => {
    const { page, context, consoleErrors, screenshot } = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    await page.goto('/agents');
    await page.waitForURL(/\/sign-in\?next=%2Fagents/);
    await signInHere(page, product.outboxDir, ENROLEE);
    await page.waitForURL((url) => url.pathname === '/account');
    const secret = page.getByTestId('mfa-secret');
    await secret.waitFor();
    await page.getByText('Your organisation requires two-factor authentication. Set it up to continue.').waitFor();
    expect(await page.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
    expect(await page.getByRole('heading', { name: 'Where you\'re signed in' }).count()).toBe(0);

    for (const path of ['/agents', '/audit', '/', '/agents/00000000-0000-4000-8000-000000000000', '/agents/00000000-0000-4000-8000-000000000000/onboarding', '/sign-in']) {
      await page.goto(path);
      await page.waitForURL((url) => url.pathname === '/account');
      await page.getByTestId('mfa-secret').waitFor();
      expect(await page.getByRole('navigation', { name: 'Main' }).count(), path).toBe(0);
    }
    // The API refuses everything else with the reason, in the product's error shape.
    const refused = await apiFromPage(page, 'GET', '/api/agents');
    expect(refused.status).toBe(403);
    expect(refused.body.error.details.reason).toBe('mfa_enrolment_required');
    expect((await horizontalOverflow(page)).by).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('foundation-mfa-enrolment-pending-390');

    // Enrolling opens the dashboard.
    await page.getByLabel('Code from the app').fill(await generate({ secret: (await page.getByTestId('mfa-secret').textContent())!.trim() }));
    await page.getByRole('button', { name: 'Turn on two-factor authentication' }).click();
    await page.getByRole('list', { name: 'Backup codes' }).waitFor();
    await page.getByRole('button', { name: 'I have saved them' }).click();
    await page.getByTestId('mfa-on').waitFor();
    await page.goto('/agents');
    await page.waitForURL((url) => url.pathname === '/agents');
    await page.getByRole('button', { name: 'Menu' }).waitFor();
    expect((await apiFromPage(page, 'GET', '/api/agents')).status).toBe(200);
    expect(unexpectedConsoleErrors(consoleErrors, '40[03]')).toEqual([]);
    await context.close();
  });
});
