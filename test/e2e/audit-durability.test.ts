import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcp, connectMcpDirect } from '../support/mcp-client.ts';
import { freePort } from '../support/processes.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 6: no audit entry is lost or doubled, whatever process dies. Split processes on real
 * NATS JetStream, Postgres and chDB; calls through the official MCP SDK client.
 */
type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }> };
interface ApiEntry { id: string; tool: string; decision: string; reason: string; memberId: string; toolArgs: Record<string, unknown> }

const textOf = (result: CallResult) => result.content.map((c) => c.text).join('\n');

/** An agent with GitHub and Notion enabled and a member connected to both (tokens from the sandbox). */
async function seedAgent(t: SplitTopology, ownerEmail: string) {
  const owner = apiClient(t.gateways[0]!);
  await signInThroughOutbox(owner, t.outboxDir, ownerEmail);
  const agentId = (await owner.call('POST', '/api/agents', { name: 'Durable agent' })).body.id as string;
  expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github', 'notion'] })).status).toBe(200);
  const issue = sandboxTokenIssuer(t.sandboxUrl);
  const member = await addMember(t.database.db, {
    agentId, email: `member-${agentId.slice(0, 8)}@example.com`, status: 'approved',
    connect: { github: await issue('github', { login: 'dana', name: 'Dana' }), notion: await issue('notion', { login: 'dana', name: 'Dana' }) },
  });
  return { owner, agentId, ...member };
}

/** Every entry of `memberId`, read page by page (500 a page, the API's cap). */
async function allEntriesOf(owner: ApiClient, memberId: string): Promise<{ entries: ApiEntry[]; total: number }> {
  const entries: ApiEntry[] = [];
  let total = 0;
  for (let offset = 0; ; offset += 500) {
    const page = await owner.call('GET', `/api/audit?member=${memberId}&limit=500&offset=${offset}`);
    expect(page.status, page.text).toBe(200);
    total = page.body.total;
    entries.push(...page.body.entries);
    if (page.body.entries.length < 500) return { entries, total };
  }
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('audit durability: writer and gateway killed', () => {
  let t: SplitTopology;
  let hanging: Server;
  let upstreamRequests = 0;
  let seed: Awaited<ReturnType<typeof seedAgent>>;

  beforeAll(async () => {
    // An upstream that takes requests and never answers: a call to it stays in flight.
    hanging = createServer(() => { upstreamRequests += 1; });
    const hangPort = await freePort();
    await new Promise<void>((resolve) => hanging.listen(hangPort, '127.0.0.1', resolve));
    t = await startSplitTopology({ gatewayCount: 2, gatewayEnv: { UPSTREAM_NOTION_URL: `http://127.0.0.1:${hangPort}/mcp` } });
    seed = await seedAgent(t, 'durable-owner@example.com');
  });
  afterAll(async () => {
    await t?.stop();
    hanging?.closeAllConnections();
    hanging?.close();
  });

  it('kill -9 of the writer during 5,000 calls: after its restart all 5,000 entries are there, none doubled', async () => {
    const CALLS = 5_000;
    const SESSIONS = 8;
    let done = 0;
    let failed = 0;
    const sessions = await Promise.all(Array.from({ length: SESSIONS }, () => connectMcp(t.gateways[0]!, seed.memberKey)));
    const outage = (async () => {
      await until('1,000 calls', 60_000, async () => (done >= 1_000 ? true : undefined));
      expect(await t.processes.audit!.stop('SIGKILL')).toBe(null);
      await until('2,500 calls', 60_000, async () => (done >= 2_500 ? true : undefined));
      await t.restart('audit');
    })();
    let next = 0;
    await Promise.all(sessions.map(async ({ client }) => {
      while (next < CALLS) {
        next += 1;
        const result = await client.callTool({ name: 'github__get_me', arguments: {} }) as CallResult;
        if (result.isError) failed += 1;
        done += 1;
      }
    }));
    await outage;
    for (const { client, transport } of sessions) {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
    expect(failed).toBe(0);

    // Each call wrote a decision record and then its completion: wait for every completion,
    // and for a read that does not move while its ten pages are fetched (a late row shifts pages).
    const completed = (e: ApiEntry) => !/outcome not recorded/.test(e.reason);
    const read = await until('5,000 completed entries, each once', 90_000, async () => {
      const r = await allEntriesOf(seed.owner, seed.memberId);
      return r.total === CALLS && r.entries.every(completed) && new Set(r.entries.map((e) => e.id)).size === CALLS ? r : undefined;
    });
    expect(read.entries).toHaveLength(CALLS);
    expect(new Set(read.entries.map((e) => e.id)).size).toBe(CALLS);
    expect(read.entries.every((e) => e.decision === 'ALLOW' && e.tool === 'get_me')).toBe(true);
  });

  it('a gateway killed mid-call still leaves the call\'s decision record', async () => {
    const before = upstreamRequests;
    const { client } = await connectMcp(t.gateways[1]!, seed.memberKey);
    const inFlight = client.callTool({ name: 'notion__notion-search', arguments: { query: 'quarterly plan' } }).catch((err: unknown) => err);
    // The upstream saw the call (so it was forwarded, hence recorded first); now the gateway dies.
    await until('the upstream request', 10_000, async () => (upstreamRequests > before ? true : undefined));
    await t.processes.gateway1!.stop('SIGKILL');
    expect(await inFlight).toBeInstanceOf(Error);
    await client.close().catch(() => undefined);

    const entry = await until('the decision record', 10_000, async () => {
      const { entries } = await allEntriesOf(seed.owner, seed.memberId);
      return entries.find((e) => e.tool === 'notion-search');
    });
    expect(entry).toMatchObject({ decision: 'ALLOW', toolArgs: { query: 'quarterly plan' } });
    expect(entry.reason).toMatch(/outcome not recorded/);
  });
});

describe('audit durability: JetStream cannot accept the write-ahead record', () => {
  let t: SplitTopology;
  let nats: ChildProcess;
  let natsDir: string;
  let natsPort: number;
  let seed: Awaited<ReturnType<typeof seedAgent>>;

  const startNats = async () => {
    nats = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(natsPort), '-js', '-sd', natsDir], { stdio: 'ignore' });
    await until('NATS', 15_000, () => new Promise<true | undefined>((resolve) => {
      const socket = tcpConnect(natsPort, '127.0.0.1');
      socket.once('connect', () => { socket.end(); resolve(true); });
      socket.once('error', () => resolve(undefined));
    }));
  };

  beforeAll(async () => {
    natsDir = mkdtempSync(join(tmpdir(), 'pc-nats-'));
    natsPort = await freePort();
    await startNats();
    t = await startSplitTopology({ env: { NATS_URL: `nats://127.0.0.1:${natsPort}` }, gatewayEnv: { AUDIT_RECORD_TIMEOUT_MS: '1000' } });
    seed = await seedAgent(t, 'busless-owner@example.com');
  });
  afterAll(async () => {
    await t?.stop();
    nats?.kill('SIGKILL');
    if (natsDir) rmSync(natsDir, { recursive: true, force: true });
  });

  it('refuses the call with a clear error and forwards nothing; the refusal is audited once the bus is back', async () => {
    const { client, transport } = await connectMcp(t.gateways[0]!, seed.memberKey);
    expect((await client.callTool({ name: 'github__get_me', arguments: {} }) as CallResult).isError).toBeFalsy();

    nats.kill('SIGKILL');
    await new Promise((resolve) => nats.once('exit', resolve));
    const refused = await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'api', title: 'unaudited must not exist' } }) as CallResult;
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/audit log unavailable.*not forwarded/i);

    const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'dana', name: 'Dana' });
    const direct = await connectMcpDirect(`${t.sandboxUrl}/github/mcp`, token);
    const issues = await direct.callTool({ name: 'list_issues', arguments: { owner: 'acme', repo: 'api' } });
    expect(JSON.stringify(issues.content)).not.toContain('unaudited must not exist');
    await direct.close();

    await startNats();
    const entry = await until('the refusal in the audit log', 30_000, async () => {
      const { entries } = await allEntriesOf(seed.owner, seed.memberId);
      return entries.find((e) => e.tool === 'issue_write');
    });
    expect(entry).toMatchObject({ decision: 'DENY', toolArgs: { title: 'unaudited must not exist' } });
    expect(entry.reason).toMatch(/audit log unavailable/i);
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  });
});
