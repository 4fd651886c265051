import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSseStream, type SseEvent, type SseStream } from '@portcullis/gateway/testing';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { connectThroughConsent, sandboxControl } from '../support/oauth-consent.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 6, live audit: GET /api/audit/stream over real processes (sandbox, PDP, audit writer,
 * two gateways) on NATS JetStream and Postgres. Tool calls go through one gateway with the
 * official MCP SDK client; a browser-less SSE client (plain fetch) listens on the other, so
 * the entry crosses NATS from the replica that decided the call to the replica streaming it.
 */
const OWNER = 'stream-owner@example.com';
const OUTSIDER = 'stream-outsider@example.com';

type ApiEntry = Record<string, unknown> & { id: string; tool: string; decision: string; agentId: string };

const entryData = (e: SseEvent) => JSON.parse(e.data) as ApiEntry;
const entriesOf = (s: SseStream) => s.events.filter((e) => e.event === 'entry').map(entryData);
const toolIs = (tool: string) => (e: SseEvent) => e.event === 'entry' && entryData(e).tool === tool;

describe('live audit stream (split processes, two gateways, NATS)', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let outsider: ApiClient;
  let agentId: string;
  let memberKey: string;
  const streams: SseStream[] = [];

  const stream = async (gateway: string, cookie: string, query = ''): Promise<SseStream> => {
    const s = await openSseStream(`${gateway}/api/audit/stream${query}`, { headers: { cookie } });
    streams.push(s);
    expect(s.status, s.errorBody).toBe(200);
    return s;
  };

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2 });
    const [g0, g1] = t.gateways as [string, string];
    owner = apiClient(g0);
    await signInThroughOutbox(owner, t.outboxDir, OWNER);
    agentId = (await owner.call('POST', '/api/agents', { name: 'Streaming agent' })).body.id;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);
    const app = await sandboxControl(t.sandboxUrl, 'github/apps', { redirect_uris: t.gateways.map((g) => `${g}/api/oauth/callback`), name: 'Stream tests' });
    expect((await owner.call('PUT', `/api/agents/${agentId}/services/github/credentials`, { clientId: app.client_id, clientSecret: app.client_secret })).status).toBe(200);
    const memberId = (await owner.call('GET', `/api/agents/${agentId}`)).body.membership.id;
    memberKey = (await owner.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key;
    await connectThroughConsent(owner, agentId, 'github', 'alice');
    const denied = await owner.call('POST', `/api/agents/${agentId}/policies`, {
      name: 'No branch listing', service: 'github', effect: 'forbid', principal: { type: 'all_members' }, tools: ['list_branches'], denyMessage: 'Branches are private',
    });
    expect(denied.status, denied.text).toBe(201);
    outsider = apiClient(g1);
    await signInThroughOutbox(outsider, t.outboxDir, OUTSIDER);
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    await t?.stop();
  });

  it('an entry reaches an SSE client on the other replica within 1 s of the tool call; a filtered-out one and other people\'s never do', async () => {
    const [g0, g1] = t.gateways as [string, string];
    const everything = await stream(g1, owner.cookie);
    const onlyGetMe = await stream(g1, owner.cookie, '?tool=GET_ME&result=ALLOW');
    const onlyDenied = await stream(g1, owner.cookie, `?result=DENY&agent=streaming`);
    const stranger = await stream(g1, outsider.cookie);

    const { client, transport } = await connectMcp(g0, memberKey);
    try {
      const search = await client.callTool({ name: 'github__search_repositories', arguments: { query: 'api' } });
      expect(search.isError).toBeFalsy();
      const branches = await client.callTool({ name: 'github__list_branches', arguments: { owner: 'acme', repo: 'api' } });
      expect(branches.isError).toBe(true);

      const calledAt = Date.now();
      const me = await client.callTool({ name: 'github__get_me', arguments: {} });
      expect(me.isError).toBeFalsy();
      const arrived = await onlyGetMe.waitFor(toolIs('get_me'), 1_000);
      const latencyMs = Date.now() - calledAt;
      expect(latencyMs, `the entry took ${latencyMs} ms from the tool call`).toBeLessThan(1_000);
      expect(entryData(arrived)).toMatchObject({ agentId, agentName: 'Streaming agent', service: 'github', decision: 'ALLOW', user: OWNER });
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }

    // One gateway published the calls one after another, and one replica fans each entry out
    // to all its streams at once, in that order: once a stream has its last expected entry,
    // anything wrongly let through would already be in front of it.
    for (const tool of ['search_repositories', 'list_branches', 'get_me']) await everything.waitFor(toolIs(tool), 5_000);
    await onlyDenied.waitFor(toolIs('list_branches'), 5_000);
    expect(entriesOf(everything).map((e) => `${e.tool}:${e.decision}`).sort()).toEqual(['get_me:ALLOW', 'list_branches:DENY', 'search_repositories:ALLOW']);
    expect(entriesOf(onlyGetMe).map((e) => e.tool)).toEqual(['get_me']);
    expect(entriesOf(onlyDenied).map((e) => [e.tool, e.reason])).toEqual([['list_branches', 'Branches are private']]);
    expect(entriesOf(stranger)).toEqual([]);

    // A streamed entry is the entry GET /api/audit lists, field for field.
    const streamed = entriesOf(everything);
    let listed: ApiEntry[] = [];
    for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
      listed = (await owner.call('GET', '/api/audit')).body.entries as ApiEntry[];
      if (streamed.every((s) => listed.some((l) => l.id === s.id))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const s of streamed) expect(s).toEqual(listed.find((l) => l.id === s.id));
  });

  it('a replica shutting down ends its streams (`end`, reason shutdown) and exits promptly', async () => {
    const s = await stream(t.gateways[1]!, owner.cookie);
    const startedAt = Date.now();
    const code = await t.processes.gateway1!.stop();
    expect(code).toBe(0);
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    const end = await s.waitFor((e) => e.event === 'end', 1_000);
    expect(JSON.parse(end.data)).toMatchObject({ reason: 'shutdown' });
  });
});
