import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { apiFromPage, launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct } from '../support/browser.ts';
import { latestMailTo } from '../support/dashboard-session.ts';

describe('dashboard sign-in in a real browser (single process, built dashboard)', () => {
  let product: RunningProduct;
  let browser: Browser;
  beforeAll(async () => {
    [product, browser] = await Promise.all([startProduct(), launchChromium()]);
  });
  afterAll(async () => {
    await browser?.close();
    await product?.stop();
  });

  it('a wrong code shows the API\'s message; the right one signs in and lands on the home overview', async () => {
    const { page, consoleErrors, screenshot, context } = await openPage(browser, product.baseUrl);
    await page.goto('/agents');
    await page.waitForURL(/\/sign-in\?next=%2Fagents/);
    await page.getByLabel('E-mail address').fill('browser-owner@example.com');
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('Sign-in code').fill('000000');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/code/i);
    await screenshot('sign-in-wrong-code');
    const wrongCodeErrors = consoleErrors.splice(0); // the browser logs the 4xx itself

    await signInThroughPage(page, product.outboxDir, 'browser-owner@example.com');
    await page.waitForURL((url) => url.pathname === '/');
    await page.locator('header .who', { hasText: 'browser-owner@example.com' }).waitFor();
    await screenshot('signed-in');
    expect(unexpectedConsoleErrors(wrongCodeErrors, '40[01]')).toEqual([]);
    expect(consoleErrors).toEqual([]);
    await context.close();
  });

  it('the e-mailed link signs in only the browser that asked for it; another browser gets the code form and no session', async () => {
    const asker = await openPage(browser, product.baseUrl);
    await asker.page.goto('/sign-in');
    await asker.page.getByLabel('E-mail address').fill('link-owner@example.com');
    await asker.page.getByRole('button', { name: 'Send me a code' }).click();
    await asker.page.getByLabel('Sign-in code').waitFor();
    const { link } = latestMailTo(product.outboxDir, 'link-owner@example.com');
    const linkPath = new URL(link).pathname + new URL(link).search;

    // Someone else's browser (a victim sent the link, or the owner's phone): no session is made there.
    const other = await openPage(browser, product.baseUrl);
    await other.page.goto(linkPath);
    await other.page.getByText('works only in the browser where you asked for it').waitFor();
    await other.page.getByLabel('E-mail address').waitFor();
    await other.page.getByLabel('Sign-in code').waitFor();
    await other.screenshot('sign-in-link-other-browser');
    expect((await apiFromPage(other.page, 'GET', '/api/auth/status')).body).toMatchObject({ authenticated: false });
    expect(unexpectedConsoleErrors(other.consoleErrors, '403')).toEqual([]);

    // The browser that asked: the link signs it in.
    await asker.page.goto(linkPath);
    await asker.page.waitForURL((url) => url.pathname === '/');
    await asker.page.locator('header .who', { hasText: 'link-owner@example.com' }).waitFor();
    expect(asker.consoleErrors).toEqual([]);
    await other.context.close();
    await asker.context.close();
  });
});
