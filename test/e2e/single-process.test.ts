import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_OWNER_EMAIL } from '@portcullis/standalone';
import { freePort, startTs, type RunningProcess } from '../support/processes.ts';
import { signIn } from '../support/dashboard-session.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { auditEntriesUntil, exerciseBadMcpInput, exerciseProtocolVersions, exerciseToolCallPath, type ProductUnderTest } from './tool-call-path.scenario.ts';

const BODY_LIMIT = 65_536;

describe('single process (npm start, embedded defaults)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-single-'));
  const outboxDir = join(dataDir, 'outbox');
  let port: number;
  let product: RunningProcess;
  let p: ProductUnderTest;

  const start = async () => {
    const proc = startTs('services/standalone/src/main.ts', {
      PORT: String(port), DATA_DIR: dataDir, MAIL_URL: `file://${outboxDir}`, LOG_LEVEL: 'warn', NODE_ENV: 'development',
      MCP_BODY_LIMIT_BYTES: String(BODY_LIMIT),
    }, 'standalone');
    const [, key] = await proc.waitFor(/Member key\s+(pcm_[A-Za-z0-9_-]{43})/, 120_000);
    return { proc, key: key! };
  };

  beforeAll(async () => {
    port = await freePort();
    const started = await start();
    product = started.proc;
    p = { baseUrl: `http://127.0.0.1:${port}`, memberKey: started.key, ownerEmail: DEMO_OWNER_EMAIL, outboxDir };
  });

  afterAll(async () => {
    await product?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints one banner with the dashboard URL, the MCP URL, how to sign in and the demo member key', () => {
    const out = product.output();
    expect(out).toContain(`Dashboard   http://127.0.0.1:${port}/`);
    expect(out).toContain(`MCP         http://127.0.0.1:${port}/mcp`);
    expect(out).toMatch(/Sign in\s+POST .*\/api\/auth\/magic-link/);
    expect(out.match(/Portcullis is running/g)).toHaveLength(1);
  });

  let ids: { allowedId: string; deniedId: string; cookie: string };
  it('serves the whole tool-call path: tools/list, allowed and denied calls, audit within 2 s', async () => {
    ids = await exerciseToolCallPath(p);
  });

  it('answers bad /mcp input with clear errors and forwards nothing', async () => {
    await exerciseBadMcpInput(p, ids.cookie, BODY_LIMIT);
  });

  it('speaks every MCP protocol version the official SDK supports, with sessions and DELETE', async () => {
    await exerciseProtocolVersions(p);
  });

  it('keeps every audit entry and every record across a stop (SIGTERM flushes) and a restart', async () => {
    // A call made just before the stop must survive it: SIGTERM flushes pending entries.
    // The client stays connected (with its SSE stream open): a stop must not wait for it.
    const { client } = await connectMcp(p.baseUrl, p.memberKey);
    await client.callTool({ name: 'slack__slack_read_channel', arguments: { channel_id: 'C0001' } });
    expect(await product.stop('SIGTERM')).toBe(0);
    await client.close();

    const restarted = await start();
    product = restarted.proc;
    expect(restarted.key).toBe(p.memberKey); // the demo key is kept under DATA_DIR and printed again

    const cookie = await signIn(p.baseUrl, outboxDir, DEMO_OWNER_EMAIL);
    const { entries } = await auditEntriesUntil(p, cookie, (es) => es.some((e) => e.tool === 'slack_read_channel'), 2_000);
    const idsNow = entries.map((e) => e.id);
    expect(idsNow).toContain(ids.allowedId);
    expect(idsNow).toContain(ids.deniedId);
    expect(entries.some((e) => e.tool === 'slack_read_channel')).toBe(true);
    expect(new Set(idsNow).size).toBe(idsNow.length);

    // Records survive too: the same key still lists the same tools.
    const again = await connectMcp(p.baseUrl, p.memberKey);
    const { tools } = await again.client.listTools();
    expect(tools.length).toBeGreaterThan(0);
    await again.transport.terminateSession().catch(() => undefined);
    await again.client.close();
  });
});
