import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
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
export async function openPage(browser: Browser, baseUrl: string, options: { viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' } = {}): Promise<{ context: BrowserContext; page: Page; consoleErrors: string[]; screenshot(name: string): Promise<void> }> {
  const context = await browser.newContext({ baseURL: baseUrl, viewport: options.viewport ?? { width: 1280, height: 900 }, colorScheme: options.colorScheme ?? 'light' });
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

/** The two sizes every page is checked at (issue 18): a laptop and a phone. */
export const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** An element as the in-page checks below read it. */
interface InPageElement { tagName: string; classList: Iterable<string>; parentElement: InPageElement | null; getBoundingClientRect(): { right: number } }
/**
 * The few browser globals the in-page functions here use, read from `globalThis` (the root
 * tsconfig has no DOM library: these functions run in the page, not in Node).
 */
export interface InPage {
  document: { scrollingElement: { scrollWidth: number } | null; body: InPageElement; querySelector(selector: string): unknown; querySelectorAll(selector: string): Iterable<InPageElement> };
  innerWidth: number;
  getComputedStyle(element: unknown): { overflowX: string };
}

/** axe-core run in the page: its serious and critical violations, as `rule: target (summary)` lines. */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  return page.evaluate(async () => {
    type AxeResult = { violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[]; failureSummary?: string }> }> };
    const axe = (globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<AxeResult> } }).axe;
    const result = await axe.run((globalThis as unknown as InPage).document, { resultTypes: ['violations'] });
    return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')} (${(n.failureSummary ?? '').split('\n').slice(1, 2).join('').trim()})`));
  });
}

/**
 * How far the page scrolls sideways (`document.scrollingElement.scrollWidth` past the window;
 * 0 when it fits), with the elements that stick out and are not inside a box that scrolls.
 */
export async function horizontalOverflow(page: Page): Promise<{ by: number; culprits: string[] }> {
  return page.evaluate(() => {
    const { document, getComputedStyle } = globalThis as unknown as InPage;
    const window = globalThis as unknown as InPage;
    const root = document.scrollingElement!;
    const by = root.scrollWidth - window.innerWidth;
    const clipped = (el: InPageElement) => {
      for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) if (getComputedStyle(up).overflowX !== 'visible') return true;
      return false;
    };
    const culprits = by <= 0 ? [] : [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1 && !clipped(el))
      .slice(0, 8).map((el) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')} → ${Math.round(el.getBoundingClientRect().right)}`);
    return { by, culprits };
  });
}

/** Waits until the page shows no skeleton loader (its data arrived), up to `ms`. */
export async function settled(page: Page, ms = 10_000): Promise<void> {
  await page.waitForFunction(() => !(globalThis as unknown as InPage).document.querySelector('[data-testid="skeleton"]'), undefined, { timeout: ms }).catch(() => undefined);
  await page.waitForTimeout(150);
}
