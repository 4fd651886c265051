import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import {
  VIEWPORTS, apiFromPage, axeViolations, horizontalOverflow, launchChromium, openPage, settled, signInThroughPage, startProduct, unexpectedConsoleErrors, type RunningProduct,
} from '../support/browser.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { freePort } from '../support/processes.ts';
import { sinkReceiver } from '../support/sink-receiver.ts';

/**
 * Issue 20, the dashboard's audit sinks (decision 055) on the single-process product (`npm
 * start`: in-process bus, embedded stores): the owner adds a webhook sink pointing at a real
 * receiver in this test (which verifies the HMAC), tests it, sees real /mcp calls arrive, sees
 * the lag and the last error while the receiver is down and the catch-up after, edits and
 * deletes it — at 1280×800 and 390×844, with axe.
 */
const SECRET = 'browser-sink-secret-0c41d9';
type OpenedPage = Awaited<ReturnType<typeof openPage>>;

describe('audit sinks in a real browser (issue 20)', () => {
  let product: RunningProduct;
  let browser: Browser;
  let owner: OpenedPage;
  let agentId = '';
  let hook: ReturnType<typeof sinkReceiver>;

  beforeAll(async () => {
    hook = sinkReceiver(await freePort(), SECRET);
    await hook.start();
    // Retries at most a second apart, so the catch-up after the outage shows within seconds.
    [product, browser] = await Promise.all([startProduct({ AUDIT_SINK_RETRY_MAX_MS: '1000' }), launchChromium()]);
    owner = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.desktop });
    await signInThroughPage(owner.page, product.outboxDir, DEMO_OWNER_EMAIL);
    agentId = ((await apiFromPage(owner.page, 'GET', '/api/agents')).body as { agents: Array<{ id: string }> }).agents[0]!.id;
  }, 240_000);
  afterAll(async () => {
    await owner?.context.close();
    await browser?.close();
    await product?.stop();
    await hook?.kill().catch(() => undefined);
  });

  const calls = async (count: number) => {
    const { client, transport } = await connectMcp(product.baseUrl, product.demoMemberKey);
    for (let i = 0; i < count; i++) await client.callTool({ name: 'github__get_me', arguments: {} });
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  };

  it('the owner adds a webhook sink, tests it, and real calls reach it; while it is down the lag and the error show, then it catches up', async () => {
    const { page, screenshot, consoleErrors } = owner;
    await page.goto(`/agents/${agentId}`);
    await page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Audit sinks' }).click();
    await page.waitForURL(new RegExp(`/agents/${agentId}/sinks$`));
    await page.getByText('No sinks yet').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('sinks-empty');

    await page.getByRole('button', { name: 'Add a sink' }).click();
    const form = page.getByRole('form', { name: 'Add a sink' });
    await form.getByLabel('Name').fill('Security webhook');
    // Plain http to another host is refused by the API, and the message sits under the URL field.
    await form.getByLabel('Webhook URL').fill('http://siem.example.com/hook');
    await form.getByLabel(/^Signing secret/).fill(SECRET);
    await form.getByRole('button', { name: 'Add sink' }).click();
    await expect(form.locator('#new-sink-url-error').textContent()).resolves.toMatch(/https/);
    expect(unexpectedConsoleErrors(consoleErrors.splice(0), '400')).toEqual([]);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('sinks-add-invalid');

    await form.getByLabel('Webhook URL').fill(hook.url);
    await form.getByRole('button', { name: 'Add sink' }).click();
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Security webhook' }) });
    await card.waitFor();
    await expect(card.getByTestId('sink-lag').textContent()).resolves.toBe('up to date');
    expect(await page.content()).not.toContain(SECRET);

    await card.getByRole('button', { name: 'Send test' }).click();
    await card.getByText('Test entry delivered.').waitFor();
    expect(hook.tests).toBe(1);

    // Real calls through /mcp reach the receiver through the in-process sink feed.
    await calls(5);
    await expect.poll(() => hook.deliveries.size, { timeout: 20_000 }).toBe(5);

    await hook.kill();
    await calls(12);
    await page.reload();
    await expect.poll(async () => (await card.getByTestId('sink-lag').textContent()) ?? '', { timeout: 30_000, interval: 1_000 }).toMatch(/^12 entries waiting$/);
    await expect(card.getByTestId('sink-last-error').textContent()).resolves.toMatch(/could not reach the sink/);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot('sinks-down');

    await hook.start();
    await expect.poll(() => hook.deliveries.size, { timeout: 30_000 }).toBe(17);
    expect([...hook.deliveries.values()].every((n) => n === 1)).toBe(true);
    await page.reload();
    await expect.poll(async () => card.getByTestId('sink-lag').textContent(), { timeout: 15_000 }).toBe('up to date');
    expect(unexpectedConsoleErrors(consoleErrors.splice(0))).toEqual([]);
  });

  it('on a phone the list and the edit form fit and pass axe; the owner renames, pauses and deletes the sink', async () => {
    const phone = await openPage(browser, product.baseUrl, { viewport: VIEWPORTS.phone });
    try {
      const { page, screenshot, consoleErrors } = phone;
      await signInThroughPage(page, product.outboxDir, DEMO_OWNER_EMAIL);
      await page.goto(`/agents/${agentId}/sinks`);
      await settled(page);
      const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'Security webhook' }) });
      await card.waitFor();
      expect((await horizontalOverflow(page)).by).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot('sinks-phone');

      await card.getByRole('button', { name: 'Edit' }).click();
      const form = page.getByRole('form', { name: 'Change sink Security webhook' });
      await form.getByLabel('Name').fill('SIEM');
      expect((await horizontalOverflow(page)).by).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot('sinks-phone-edit');
      await form.getByRole('button', { name: 'Save sink' }).click();
      await page.getByRole('status').filter({ hasText: 'Sink “SIEM” saved.' }).waitFor();

      const renamed = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'SIEM' }) });
      await renamed.getByRole('button', { name: 'Pause' }).click();
      await renamed.getByRole('button', { name: 'Resume' }).waitFor();
      await renamed.getByRole('button', { name: 'Delete' }).click();
      await page.getByRole('dialog', { name: /^Delete the sink/ }).getByRole('button', { name: 'Delete sink' }).click();
      await page.getByText('No sinks yet').waitFor();
      expect((await apiFromPage(page, 'GET', `/api/agents/${agentId}/sinks`)).body).toEqual({ sinks: [] });
      expect(unexpectedConsoleErrors(consoleErrors)).toEqual([]);
    } finally {
      await phone.context.close();
    }
  });
});
