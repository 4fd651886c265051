import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isolatingFetch } from '@portcullis/core';
import { apiClient, signInThroughOutbox } from '../support/api-client.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcpDirect } from '../support/mcp-client.ts';
import { startCluster, type Cluster } from './cluster.ts';

/**
 * Issue 9: kill -9 one audit writer, one policy service, one gateway, the NATS node leading
 * the audit stream and a NATS node following it, each in turn (down 6 s, decision 036), under
 * a steady load of tool calls through both gateways (every MCP session's requests alternate
 * between them, as behind a balancer; a refused connection fails over to the other gateway,
 * as a balancer would). After each fault: no audit entry lost or doubled,
 * no call forwarded without a verdict, and calls through every gateway succeed again within
 * 5 s of the restart. The figures are printed.
 */
const WORKERS = 6;
/**
 * The offered load, paced: at most this many calls per second across the workers. A closed loop
 * would offer whatever the product can take, so a faster gateway would load the NATS cluster it
 * is being tested against harder on the same two cores (refused calls come back at once).
 */
const CALLS_PER_SECOND = 400;
const WORKER_INTERVAL_MS = (WORKERS * 1000) / CALLS_PER_SECOND;
const BEFORE_MS = 1_500;
/**
 * Longer than a NATS election: a killed stream leader leaves its stream without one until a
 * follower's Raft election timer (4-9 s in nats-server) fires, and every write-ahead record is
 * refused until then. With the node down 6 s, the election ends at most 3 s after the restart
 * (plus the campaign), whichever node led; at 2 s a killed leader could outlast the 5 s bound
 * through no fault of the product (decision 036).
 */
const DOWN_MS = 6_000;
/** Longer than the 5 s recovery bound, so a slower recovery is seen rather than cut off. */
const AFTER_MS = 5_500;

type Outcome = 'allowed' | 'denied-unavailable' | 'refused-audit' | 'denied-other' | 'error';
interface Call { title: string; outcome: Outcome; gateway: number; at: number }

function classify(result: { isError?: boolean; content?: Array<{ text?: string }> }): Outcome {
  if (!result.isError) return 'allowed';
  const text = result.content?.map((c) => c.text).join(' ') ?? '';
  if (/policy service unavailable/i.test(text)) return 'denied-unavailable';
  if (/audit log unavailable/i.test(text)) return 'refused-audit';
  return 'denied-other';
}

/** An MCP client whose requests alternate between gateways, failing over on a refused connection. */
async function balancedClient(gateways: string[], key: string, served: { last: number }) {
  let turn = Math.floor(Math.random() * gateways.length);
  const balanced: typeof fetch = async (input, init) => {
    for (let attempt = 0; attempt < gateways.length; attempt++) {
      const i = turn++ % gateways.length;
      const url = new URL(String(input instanceof Request ? input.url : input));
      url.host = new URL(gateways[i]!).host;
      try {
        const res = await isolatingFetch(url, init);
        served.last = i;
        return res;
      } catch (err) {
        const refused = (err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED';
        if (!refused || attempt === gateways.length - 1) throw err;
      }
    }
    throw new Error('unreachable');
  };
  const client = new Client({ name: 'fault-load', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gateways[0]}/mcp`), { fetch: balanced, requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
  return client;
}

describe('faults under load: 3-node NATS (R3), 2 gateways, 2 policy services, 2 audit writers, one ClickHouse', () => {
  let cluster: Cluster;
  let memberKey: string;
  let agentId: string;
  let token: string;
  let clickhouse: ClickHouseClient;
  const figures: Array<Record<string, string | number>> = [];

  beforeAll(async () => {
    cluster = await startCluster();
    const owner = apiClient(cluster.gateways[0]!);
    await signInThroughOutbox(owner, cluster.outboxDir, 'fault-owner@example.com');
    agentId = (await owner.call('POST', '/api/agents', { name: 'Fault agent' })).body.id;
    await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] });
    token = await sandboxTokenIssuer(cluster.sandboxUrl)('github', { login: 'loadgen', name: 'Load' });
    ({ memberKey } = await addMember(cluster.database.db, { agentId, email: 'load@example.com', status: 'approved', connect: { github: token } }));
    clickhouse = createClient({ url: cluster.clickhouseUrl });
  });
  afterAll(async () => {
    if (figures.length > 0) console.table(figures);
    await clickhouse?.close();
    await cluster?.stop();
  });

  /**
   * The cluster member a fault names, and the JetStream streams it leads. `nats-leader` is the
   * node leading the audit stream (its death costs an election: no write-ahead record is accepted
   * until one of the others wins it); `nats-follower` a node leading neither that stream nor the
   * insert lock's bucket (its clients reconnect to the others).
   */
  async function resolved(fault: string): Promise<{ member: string; led: string }> {
    if (!fault.startsWith('nats-')) return { member: fault, led: '-' };
    const leaders = await cluster.streamLeaders();
    const leaderOf = (suffix: string) => Object.entries(leaders).find(([stream]) => stream.endsWith(suffix))?.[1];
    const busy = new Set([leaderOf('AUDIT'), leaderOf('audit-insert-lock')]);
    const node = fault === 'nats-leader' ? leaderOf('AUDIT') : ['n1', 'n2', 'n3'].find((n) => !busy.has(n)) ?? 'n2';
    if (!node || node === 'none') throw new Error(`no audit stream leader to kill: ${JSON.stringify(leaders)}`);
    const led = Object.entries(leaders).filter(([, leader]) => leader === node).map(([stream]) => stream).join(' ') || '-';
    return { member: `nats-${node.slice(1)}`, led };
  }

  /** Runs the load while `fault` happens; returns every call and when the member came back. */
  async function underLoad(label: string, fault: string): Promise<{ calls: Call[]; restartedAt: number; led: string }> {
    const calls: Call[] = [];
    let running = true;
    let n = 0;
    const worker = async () => {
      const served = { last: 0 };
      let client = await balancedClient(cluster.gateways, memberKey, served);
      while (running) {
        const started = Date.now();
        const title = `${label}-${n++}`;
        try {
          const result = await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'web', title } });
          calls.push({ title, outcome: classify(result as never), gateway: served.last, at: Date.now() });
        } catch {
          calls.push({ title, outcome: 'error', gateway: served.last, at: Date.now() });
          await client.close().catch(() => undefined);
          client = await balancedClient(cluster.gateways, memberKey, served).catch(() => client);
        }
        const pause = WORKER_INTERVAL_MS - (Date.now() - started);
        if (pause > 0) await new Promise((r) => setTimeout(r, pause));
      }
      await client.close().catch(() => undefined);
    };
    const workers = Array.from({ length: WORKERS }, worker);
    await new Promise((r) => setTimeout(r, BEFORE_MS));
    const { member, led } = await resolved(fault);
    await cluster.members[member]!.kill();
    await new Promise((r) => setTimeout(r, DOWN_MS));
    await cluster.members[member]!.start();
    const restartedAt = Date.now();
    await new Promise((r) => setTimeout(r, AFTER_MS));
    running = false;
    await Promise.all(workers);
    return { calls, restartedAt, led: `${member}: ${led}` };
  }

  /** Entries per title in the audit store, once every answered call's entry is there (30 s at most). */
  async function entriesOf(label: string, calls: Call[]): Promise<Map<string, Array<{ decision: string; reason: string }>>> {
    const answered = calls.filter((c) => c.outcome !== 'error');
    const deadline = Date.now() + 30_000;
    for (;;) {
      const result = await clickhouse.query({
        // Each entry once in audit_entries (no FINAL, so a double shows), plus write-ahead records
        // still open: a call forwarded by a gateway that died has its decision record there (decision 035).
        query: `SELECT JSONExtractString(tool_args, 'title') AS title, decision, reason FROM (
                  SELECT tool_args, decision, reason FROM portcullis.audit_entries WHERE agent_id = {agent:String}
                  UNION ALL
                  SELECT tool_args, decision, reason FROM portcullis.audit_open
                  WHERE agent_id = {agent:String} AND id NOT IN (SELECT id FROM portcullis.audit_entries WHERE agent_id = {agent:String}))
                WHERE startsWith(JSONExtractString(tool_args, 'title'), {label:String})`,
        query_params: { agent: agentId, label: `${label}-` }, format: 'JSONEachRow',
      });
      const byTitle = new Map<string, Array<{ decision: string; reason: string }>>();
      for (const row of await result.json<{ title: string; decision: string; reason: string }>()) {
        byTitle.set(row.title, [...(byTitle.get(row.title) ?? []), row]);
      }
      const complete = answered.every((c) => byTitle.get(c.title)?.some((e) => !/outcome not recorded/.test(e.reason)));
      if (complete || Date.now() > deadline) return byTitle;
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  async function upstreamTitles(label: string): Promise<Set<string>> {
    const direct = await connectMcpDirect(`${cluster.sandboxUrl}/github/mcp`, token);
    const listed = await direct.callTool({ name: 'list_issues', arguments: { owner: 'acme', repo: 'web' } }) as { content: Array<{ text: string }> };
    await direct.close();
    return new Set((JSON.parse(listed.content[0]!.text).items as Array<{ title: string }>).map((i) => i.title).filter((t) => t.startsWith(`${label}-`)));
  }

  it.each([
    ['audit writer', 'audit-1'],
    ['policy service', 'policy-1'],
    ['gateway', 'gateway-2'],
    ['NATS node leading the audit stream', 'nats-leader'],
    ['NATS node following it', 'nats-follower'],
  ])('kill -9 of one %s (%s): nothing lost, doubled or forwarded without a verdict; recovered within 5 s', async (_kind, member) => {
    const label = `fault-${member}`;
    const { calls, restartedAt, led } = await underLoad(label, member);
    const entries = await entriesOf(label, calls);
    const upstream = await upstreamTitles(label);

    const count = (o: Outcome) => calls.filter((c) => c.outcome === o).length;
    const duplicated = [...entries.values()].filter((e) => e.length > 1).length;
    const lost = calls.filter((c) => c.outcome !== 'error' && (entries.get(c.title)?.length ?? 0) !== 1).length;
    const wrongDecision = calls.filter((c) => c.outcome !== 'error' && entries.get(c.title)?.[0]?.decision !== (c.outcome === 'allowed' ? 'ALLOW' : 'DENY')).length;
    const withoutVerdict = [...upstream].filter((title) => entries.get(title)?.[0]?.decision !== 'ALLOW').length;
    const deniedButForwarded = calls.filter((c) => c.outcome !== 'allowed' && c.outcome !== 'error' && upstream.has(c.title)).length;
    const recoveredAfter = Math.max(...[0, 1].map((g) => {
      const first = calls.find((c) => c.gateway === g && c.outcome === 'allowed' && c.at >= restartedAt);
      return first ? first.at - restartedAt : Infinity;
    }));
    figures.push({
      fault: member, attempted: calls.length, allowed: count('allowed'), 'denied-unavailable': count('denied-unavailable'),
      'refused-audit': count('refused-audit'), 'transport-errors': count('error'), stored: entries.size, duplicated, lost,
      'forwarded-without-verdict': withoutVerdict, 'recovery-ms': recoveredAfter, 'it led': led,
    });

    if (duplicated + lost + withoutVerdict > 0) {
      // What the audit writers said, for a failure seen only in CI.
      for (const name of ['audit-1', 'audit-2']) console.log(`--- ${name} (last 4 kB)\n${cluster.members[name]!.output().slice(-4096)}`);
      console.log(`--- clickhouse front (last 4 kB)\n${cluster.clickhouseOutput().slice(-4096)}`);
      console.log('titles not stored once:', calls.filter((c) => c.outcome !== 'error' && (entries.get(c.title)?.length ?? 0) !== 1).slice(0, 10));
    }
    expect(calls.length).toBeGreaterThan(50);
    expect(count('denied-other')).toBe(0);
    expect(duplicated).toBe(0);
    expect(lost).toBe(0);
    expect(wrongDecision).toBe(0);
    expect(withoutVerdict).toBe(0);
    expect(deniedButForwarded).toBe(0);
    expect(recoveredAfter).toBeLessThanOrEqual(5_000);
  });
});
