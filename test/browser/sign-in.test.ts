import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchChromium, openPage, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct } from '../support/browser.ts';

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

  it('a wrong code shows the API\'s message; the right one signs in and lands on the agents page', async () => {
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
    await page.waitForURL(/\/agents/);
    await page.locator('header .who', { hasText: 'browser-owner@example.com' }).waitFor();
    await screenshot('signed-in');
    expect(unexpectedConsoleErrors(wrongCodeErrors, '40[01]')).toEqual([]);
    expect(consoleErrors).toEqual([]);
    await context.close();
  });
});
