import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { latestMailTo } from './dashboard-session.ts';
import { freePort, repoRoot, startTs, type RunningProcess } from './processes.ts';

/** Where browser tests leave screenshots (kept by CI as artifacts; ignored by git). */
export const ARTIFACTS = join(repoRoot, 'test-artifacts', 'screenshots');

/** Debian's Chromium, launched as stack-notes prescribes (no downloaded browser, no background networking). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** The product as `npm start` runs it (single process, embedded defaults, sandbox connectors, built dashboard). */
export interface RunningProduct {
  baseUrl: string;
  outboxDir: string;
  dataDir: string;
  demoMemberKey: string;
  /** The sandbox connectors' base URL (their OAuth servers and `/_sandbox/…` test controls). */
  sandboxUrl: string;
  process: RunningProcess;
  stop(): Promise<void>;
}

export async function startProduct(env: Record<string, string> = {}): Promise<RunningProduct> {
  // The dashboard as the sources say now (a no-op when the build is current).
  const built = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build-web.mjs')], { cwd: repoRoot, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('the dashboard did not build');
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-browser-'));
  const outboxDir = join(dataDir, 'outbox');
  const port = await freePort();
  const sandboxPort = env.SANDBOX_PORT ?? String(await freePort());
  const proc = startTs('services/standalone/src/main.ts', {
    PORT: String(port), SANDBOX_PORT: sandboxPort, DATA_DIR: dataDir, MAIL_URL: `file://${outboxDir}`, LOG_LEVEL: 'warn', NODE_ENV: 'development',
    ...(process.env.WEB_BUILD_DIR ? { WEB_BUILD_DIR: process.env.WEB_BUILD_DIR } : {}), ...env,
  }, 'standalone');
  const [, key] = await proc.waitFor(/Member key\s+(pcm_[A-Za-z0-9_-]{43})/, 120_000);
  return {
    baseUrl: `http://127.0.0.1:${port}`, outboxDir, dataDir, demoMemberKey: key!, sandboxUrl: `http://127.0.0.1:${sandboxPort}`, process: proc,
    async stop() {
      await proc.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A page that records every console error and uncaught page error (each test asserts there
 * are none) and saves full-page screenshots under `test-artifacts/screenshots/<name>.png`.
 */
export async function openPage(browser: Browser, baseUrl: string): Promise<{ context: BrowserContext; page: Page; consoleErrors: string[]; screenshot(name: string): Promise<void> }> {
  const context = await browser.newContext({ baseURL: baseUrl, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()); });
  page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    context, page, consoleErrors,
    async screenshot(name) {
      await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
    },
  };
}

/** Signs `email` in through the sign-in page, reading the code from the `file://` outbox. */
export async function signInThroughPage(page: Page, outboxDir: string, email: string): Promise<void> {
  await page.goto('/sign-in');
  await page.getByLabel('E-mail address').fill(email);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('Sign-in code').waitFor();
  const { code } = latestMailTo(outboxDir, email);
  await page.getByLabel('Sign-in code').fill(code!);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => !url.pathname.startsWith('/sign-in'));
}

/**
 * Console errors other than the browser's own "Failed to load resource" line for a 4xx a test
 * provoked on purpose (`statuses`: a regex alternative of the statuses expected, e.g. `401`).
 */
export function unexpectedConsoleErrors(errors: string[], statuses = '40\\d'): string[] {
  return errors.filter((e) => !new RegExp(`Failed to load resource.*\\b(${statuses})\\b`).test(e));
}

/** Calls the gateway from inside the page, as the dashboard does (same origin, the page's session cookie). */
export function apiFromPage(page: Page, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  return page.evaluate(async ([m, p, b]) => {
    const res = await fetch(p as string, { method: m as string, headers: b === undefined ? {} : { 'content-type': 'application/json' }, body: b === undefined ? undefined : JSON.stringify(b) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }, [method, path, body] as const);
}
