import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, signInThroughOutbox } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { freePort, repoRoot, startTs, type RunningProcess } from '../support/processes.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Split mode: the dashboard as its own process (`node web/build/index.js`) in front of a
 * gateway process, forwarding `/api` and `/mcp` (decision 019). The gateway's PUBLIC_URL is the
 * dashboard's address, as an operator would set it.
 */
describe('dashboard in split mode: its own process, /api and /mcp forwarded to the gateway', () => {
  let t: SplitTopology;
  let web: RunningProcess;
  let webUrl: string;

  beforeAll(async () => {
    expect(spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build-web.mjs')], { cwd: repoRoot, stdio: 'inherit' }).status).toBe(0);
    const webPort = await freePort();
    webUrl = `http://127.0.0.1:${webPort}`;
    t = await startSplitTopology({ gatewayEnv: { PUBLIC_URL: webUrl } });
    web = startTs(join('web', process.env.WEB_BUILD_DIR ?? 'build', 'index.js'), {
      PORT: String(webPort), HOST: '127.0.0.1', ORIGIN: webUrl, PORTCULLIS_GATEWAY_URL: t.gateways[0]!,
    }, 'web');
    await web.waitFor(/Listening on/);
  });
  afterAll(async () => {
    await web?.stop();
    await t?.stop();
  });

  it('serves the dashboard and signs in through it; state-changing calls from its origin pass, cross-site ones do not', async () => {
    const page = await fetch(`${webUrl}/agents`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/_app\/immutable/);

    const owner = apiClient(webUrl);
    await signInThroughOutbox(owner, t.outboxDir, 'split-web@example.com');
    expect((await owner.call('GET', '/api/auth/status')).body).toMatchObject({ authenticated: true, user: { email: 'split-web@example.com' } });
    const agent = await owner.call('POST', '/api/agents', { name: 'Through the dashboard server' });
    expect(agent.status, agent.text).toBe(201);

    const crossSite = await fetch(`${webUrl}/api/agents`, {
      method: 'POST', headers: { cookie: owner.cookie, origin: 'https://evil.example', 'content-type': 'application/json' }, body: JSON.stringify({ name: 'csrf' }),
    });
    expect(crossSite.status).toBe(403);
    expect(await crossSite.json()).toMatchObject({ error: { code: 'forbidden' } });
    expect((await owner.call('GET', '/api/agents')).body.total).toBe(1);

    // The live audit stream passes through as a stream.
    const abort = new AbortController();
    const stream = await fetch(`${webUrl}/api/audit/stream`, { headers: { cookie: owner.cookie }, signal: abort.signal });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/text\/event-stream/);
    abort.abort();

    // And agents reach /mcp at the public address.
    const memberId = (await owner.call('GET', `/api/agents/${agent.body.id}`)).body.membership.id;
    const key = (await owner.call('PUT', `/api/agents/${agent.body.id}/members/${memberId}/key`, {})).body.key;
    const { client } = await connectMcp(webUrl, key);
    expect((await client.listTools()).tools).toEqual([]);
    await client.close();
  });

  it('forwards the OAuth metadata and endpoints for agent clients; the consent page is its own (decision 050)', async () => {
    const resource = await fetch(`${webUrl}/.well-known/oauth-protected-resource/mcp`);
    expect(resource.status).toBe(200);
    expect(await resource.json()).toMatchObject({ resource: `${webUrl}/mcp`, authorization_servers: [webUrl] });
    expect(await (await fetch(`${webUrl}/.well-known/oauth-authorization-server`)).json()).toMatchObject({ token_endpoint: `${webUrl}/oauth/token` });
    const registered = await fetch(`${webUrl}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'split', redirect_uris: ['http://127.0.0.1:1/cb'] }) });
    expect(registered.status).toBe(201);
    const { client_id } = await registered.json() as { client_id: string };
    const authorize = await fetch(`${webUrl}/oauth/authorize?client_id=${client_id}&response_type=code&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256`, { redirect: 'manual' });
    expect(authorize.status).toBe(302);
    const consent = new URL(authorize.headers.get('location')!);
    expect(consent.origin + consent.pathname).toBe(`${webUrl}/oauth/consent`);
    const page = await fetch(consent);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/_app\/immutable/);
  });

  it('answers 503 in the error shape when the gateway is down', async () => {
    await t.processes.gateway0!.stop();
    const res = await fetch(`${webUrl}/api/auth/status`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: { code: 'unavailable' } });
  });
});
