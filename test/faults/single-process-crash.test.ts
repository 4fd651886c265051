import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import { freePort, LOAD_TEST_QUOTAS, startTs, type RunningProcess } from '../support/processes.ts';
import { signIn } from '../support/dashboard-session.ts';
import { connectMcp } from '../support/mcp-client.ts';

/**
 * Issue 30 item 1 (decision 070): `npm start` (one process, in-process bus, embedded stores)
 * killed with kill -9 under load and restarted on the same DATA_DIR. Every call a client saw
 * answered has exactly one audit entry, none is doubled, and a call never answered has none or
 * a DENY / "outcome not recorded" one. The figures are printed.
 */
const CLIENTS = 8;
const LOAD_MS = 5_000;
/** Most clients make allowed calls; every fourth makes calls a demo policy forbids (the DENY path). */
const ALLOWED = { name: 'linear__list_issues', args: (mark: string) => ({ query: mark }) };
const FORBIDDEN = { name: 'github__delete_repository', args: (mark: string) => ({ owner: 'acme', repo: mark }) };

interface Call { mark: string; outcome: 'allowed' | 'denied' | 'unanswered' }
interface ApiEntry { id: string; decision: string; reason: string; tool: string; toolArgs: Record<string, unknown> }

describe('faults: kill -9 of the single-process product (npm start) under load', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-single-crash-'));
  const outboxDir = join(dataDir, 'outbox');
  let product: RunningProcess | undefined;

  const start = async (port: number) => {
    const proc = startTs('services/standalone/src/main.ts', {
      PORT: String(port), DATA_DIR: dataDir, MAIL_URL: `file://${outboxDir}`, LOG_LEVEL: 'warn', NODE_ENV: 'development', ...LOAD_TEST_QUOTAS,
    }, 'standalone');
    const [, key] = await proc.waitFor(/Member key\s+(pcm_[A-Za-z0-9_-]{43})/, 120_000);
    return { proc, key: key! };
  };

  afterAll(async () => {
    await product?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Every entry of the crash run's calls, by the mark each call sent (its query, or its repository). */
  async function entriesByMark(baseUrl: string, cookie: string): Promise<Map<string, ApiEntry[]>> {
    const byMark = new Map<string, ApiEntry[]>();
    for (let offset = 0; ; offset += 500) {
      const res = await fetch(`${baseUrl}/api/audit?limit=500&offset=${offset}`, { headers: { cookie } });
      expect(res.status).toBe(200);
      const { entries } = (await res.json()) as { entries: ApiEntry[] };
      for (const e of entries) {
        const mark = String(e.toolArgs.query ?? e.toolArgs.repo ?? '');
        if (mark.startsWith('crash-')) byMark.set(mark, [...(byMark.get(mark) ?? []), e]);
      }
      if (entries.length < 500) return byMark;
    }
  }

  it('every answered call has exactly one entry after the restart; none doubled; unanswered ones none or an honest one', async () => {
    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const first = await start(port);
    product = first.proc;

    const calls: Call[] = [];
    let running = true;
    const worker = async (w: number) => {
      const { client } = await connectMcp(baseUrl, first.key);
      const tool = w % 4 === 3 ? FORBIDDEN : ALLOWED;
      for (let n = 0; running; n++) {
        const mark = `crash-${w}-${n}`;
        try {
          const result = await client.callTool({ name: tool.name, arguments: tool.args(mark) }) as { isError?: boolean };
          calls.push({ mark, outcome: result.isError ? 'denied' : 'allowed' });
        } catch {
          calls.push({ mark, outcome: 'unanswered' });
          if (product!.child.exitCode !== null || product!.child.signalCode !== null) break;
        }
      }
      await client.close().catch(() => undefined);
    };
    const workers = Array.from({ length: CLIENTS }, (_, w) => worker(w));
    await new Promise((r) => setTimeout(r, LOAD_MS));
    const killedAt = Date.now();
    product.child.kill('SIGKILL');
    await product.stop();
    running = false;
    await Promise.all(workers);

    const restarted = await start(port);
    product = restarted.proc;
    const cookie = await signIn(baseUrl, outboxDir, DEMO_OWNER_EMAIL);
    const answered = calls.filter((c) => c.outcome !== 'unanswered');
    // The replay goes through the audit writer (batched): wait for every answered call's entry, 30 s at most.
    const deadline = Date.now() + 30_000;
    let entries = await entriesByMark(baseUrl, cookie);
    while (!answered.every((c) => entries.has(c.mark)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      entries = await entriesByMark(baseUrl, cookie);
    }

    const lost = answered.filter((c) => (entries.get(c.mark)?.length ?? 0) === 0);
    const doubled = [...entries].filter(([, es]) => new Set(es.map((e) => e.id)).size > 1 || es.length > 1);
    const wrongDecision = answered.filter((c) => entries.get(c.mark)?.[0] && entries.get(c.mark)![0]!.decision !== (c.outcome === 'allowed' ? 'ALLOW' : 'DENY'));
    const unanswered = calls.filter((c) => c.outcome === 'unanswered');
    const unansweredDishonest = unanswered.filter((c) => (entries.get(c.mark) ?? []).some((e) => e.decision !== 'DENY' && !/outcome not recorded/.test(e.reason)));
    console.table([{
      answered: answered.length, allowed: answered.filter((c) => c.outcome === 'allowed').length, denied: answered.filter((c) => c.outcome === 'denied').length, unanswered: unanswered.length,
      'unanswered with an entry': unanswered.filter((c) => entries.has(c.mark)).length, lost: lost.length, doubled: doubled.length,
      'wrong decision': wrongDecision.length, 'replayed within ms': Date.now() - killedAt,
    }]);
    if (lost.length + doubled.length > 0) console.log('lost:', lost.slice(0, 10), 'doubled:', doubled.slice(0, 5), restarted.proc.output().slice(-2048));

    // The restart replayed the log (what the writer had not stored when the process died).
    expect(restarted.proc.output()).toMatch(/audit log: replaying \d+ audit record/);
    expect(answered.length).toBeGreaterThan(200);
    expect(answered.filter((c) => c.outcome === 'denied').length).toBeGreaterThan(20);
    expect(lost).toEqual([]);
    expect(doubled).toEqual([]);
    expect(wrongDecision).toEqual([]);
    expect(unansweredDishonest).toEqual([]);
  }, 240_000);
});
