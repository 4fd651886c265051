import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { connectors, inputSchemaOf, openWithSecret, schema } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';
import { CLIENT_SECRET_LABEL, createCredentialsService, WEBHOOK_SECRET_LABEL } from '../modules/connectors/credentials-service.ts';

const GENEROUS_SIGN_IN_LIMITS = {
  RATE_LIMIT_MAGIC_LINK_PER_ADDRESS: '100000', RATE_LIMIT_MAGIC_LINK_PER_IP: '100000', RATE_LIMIT_VERIFY_PER_IP: '100000',
};
const WEBHOOK_SECRET_SERVICES = ['slack', 'linear', 'stripe', 'huggingface'];

interface MetaEntry { key: string; label: string; oauth: string; webhookSecret: boolean; entityTypes: string[]; toolCount: number; tierCounts: { read: number; write: number; destructive: number } }
interface CatalogTool { name: string; description: string; inputSchema: unknown }
interface CatalogService { service: string; label: string; tools: Record<'read' | 'write' | 'destructive', CatalogTool[]> }
interface CredentialsEntry { service: string; configured: boolean; clientId: string | null; hasWebhookSecret: boolean; updatedAt: string }

let h: ApiHarness;
let owner: string;
beforeAll(async () => {
  h = await createApiHarness(GENEROUS_SIGN_IN_LIMITS);
  owner = await h.signIn('cred-owner@example.com');
});
afterAll(async () => { await h.close(); });

async function freshAgent(): Promise<string> {
  const res = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Connected' }, cookie: owner });
  expect(res.statusCode).toBe(201);
  return (res.json() as { id: string }).id;
}

const credentialsUrl = (agentId: string, service: string) => `/api/agents/${agentId}/services/${service}/credentials`;
const put = (agentId: string, service: string, payload: unknown) => h.request({ method: 'PUT', url: credentialsUrl(agentId, service), payload: payload as Record<string, unknown>, cookie: owner });
const list = async (agentId: string) => {
  const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/services/credentials`, cookie: owner });
  expect(res.statusCode).toBe(200);
  return (res.json() as { credentials: CredentialsEntry[] }).credentials;
};
const rowsOf = (agentId: string) => h.db.select().from(schema.connectorCredentials).where(eq(schema.connectorCredentials.agentId, agentId));

describe('GET /api/connectors/meta', () => {
  it('lists all 16 connectors with tier counts that add up to 281 tools', async () => {
    const res = await h.request({ method: 'GET', url: '/api/connectors/meta', cookie: owner });
    expect(res.statusCode).toBe(200);
    const meta = (res.json() as { connectors: MetaEntry[] }).connectors;
    expect(meta).toHaveLength(16);
    expect(meta.map((c) => c.key)).toEqual(connectors.map((c) => c.key));
    for (const c of meta) {
      expect(c.tierCounts.read + c.tierCounts.write + c.tierCounts.destructive).toBe(c.toolCount);
      expect(['own_app', 'managed']).toContain(c.oauth);
      expect(c.label).not.toBe('');
    }
    expect(meta.reduce((n, c) => n + c.toolCount, 0)).toBe(281);
    expect(meta.filter((c) => c.webhookSecret).map((c) => c.key).sort()).toEqual([...WEBHOOK_SECRET_SERVICES].sort());
    expect(meta.find((c) => c.key === 'github')).toMatchObject({ oauth: 'own_app', toolCount: 40, tierCounts: { read: 24, write: 11, destructive: 5 } });
  });
});

describe('GET /api/tools/catalog', () => {
  it('lists every tool of every connector, grouped by tier', async () => {
    const res = await h.request({ method: 'GET', url: '/api/tools/catalog', cookie: owner });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { services: CatalogService[]; total: number };
    expect(body.total).toBe(281);
    expect(body.services).toHaveLength(16);
    const counted = body.services.reduce((n, s) => n + s.tools.read.length + s.tools.write.length + s.tools.destructive.length, 0);
    expect(counted).toBe(281);
  });

  it('filters to one service with exact tool names, tiers and input schemas', async () => {
    const res = await h.request({ method: 'GET', url: '/api/tools/catalog?service=github', cookie: owner });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { services: CatalogService[]; total: number };
    expect(body.total).toBe(40);
    expect(body.services).toHaveLength(1);
    const [github] = body.services;
    expect(github!.service).toBe('github');
    expect(github!.tools.read.map((t) => t.name)).toEqual([
      'get_me', 'get_teams', 'get_team_members', 'search_repositories', 'get_file_contents', 'get_repository_tree',
      'list_branches', 'list_commits', 'get_commit', 'list_releases', 'search_code', 'list_issues', 'issue_read',
      'search_issues', 'list_pull_requests', 'pull_request_read', 'search_pull_requests', 'actions_list', 'actions_get',
      'get_job_logs', 'list_code_scanning_alerts', 'list_dependabot_alerts', 'list_secret_scanning_alerts', 'list_repository_collaborators',
    ]);
    expect(github!.tools.write.map((t) => t.name)).toEqual([
      'create_repository', 'fork_repository', 'create_branch', 'create_or_update_file', 'push_files', 'issue_write',
      'add_issue_comment', 'create_pull_request', 'update_pull_request', 'merge_pull_request', 'pull_request_review_write',
    ]);
    expect(github!.tools.destructive.map((t) => t.name)).toEqual(['delete_file', 'delete_repository', 'actions_run_trigger', 'label_write', 'projects_write']);
    const catalogTool = connectors.find((c) => c.key === 'github')!.tools.find((t) => t.name === 'get_file_contents')!;
    expect(github!.tools.read.find((t) => t.name === 'get_file_contents')).toEqual({
      name: 'get_file_contents', description: catalogTool.description, inputSchema: inputSchemaOf(catalogTool),
    });
  });

  it.each(connectors.map((c) => c.key))('filters to %s', async (service) => {
    const res = await h.request({ method: 'GET', url: `/api/tools/catalog?service=${service}`, cookie: owner });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { services: CatalogService[]; total: number };
    expect(body.services.map((s) => s.service)).toEqual([service]);
    expect(body.total).toBe(connectors.find((c) => c.key === service)!.tools.length);
  });

  it('refuses an unknown service, naming it, and unknown parameters', async () => {
    const unknown = await h.request({ method: 'GET', url: '/api/tools/catalog?service=myspace', cookie: owner });
    expect(unknown.statusCode).toBe(400);
    expect((unknown.json() as { error: { code: string; message: string } }).error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('myspace') });
    const extra = await h.request({ method: 'GET', url: '/api/tools/catalog?tier=read', cookie: owner });
    expect(extra.statusCode).toBe(400);
    expect(extra.json().error.message).toContain('tier');
  });
});

describe('credentials', () => {
  it('sets, lists, replaces and removes credentials without ever returning a secret', async () => {
    const agentId = await freshAgent();
    expect(await list(agentId)).toEqual([]);

    const first = await put(agentId, 'github', { clientId: 'Iv1.client-one', clientSecret: 'github-client-secret-ONE' });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ service: 'github', configured: true, hasWebhookSecret: false });
    expect(first.body).not.toContain('github-client-secret-ONE');

    const listed = await list(agentId);
    expect(listed).toEqual([{ service: 'github', configured: true, clientId: 'Iv1.client-one', hasWebhookSecret: false, updatedAt: expect.any(String) }]);
    const firstUpdatedAt = listed[0]!.updatedAt;

    const second = await put(agentId, 'github', { clientId: 'Iv1.client-two', clientSecret: 'github-client-secret-TWO' });
    expect(second.statusCode).toBe(200);
    const relisted = await list(agentId);
    expect(relisted).toHaveLength(1);
    expect(relisted[0]!.clientId).toBe('Iv1.client-two');
    expect(Date.parse(relisted[0]!.updatedAt)).toBeGreaterThanOrEqual(Date.parse(firstUpdatedAt));
    expect((await rowsOf(agentId))).toHaveLength(1);

    expect((await put(agentId, 'vercel', { clientId: 'vercel-id', clientSecret: 'vercel-secret-xyz' })).statusCode).toBe(200);
    expect((await list(agentId)).map((c) => c.service)).toEqual(['github', 'vercel']);

    const removed = await h.request({ method: 'DELETE', url: credentialsUrl(agentId, 'github'), cookie: owner });
    expect(removed.statusCode).toBe(204);
    expect((await list(agentId)).map((c) => c.service)).toEqual(['vercel']);
    const again = await h.request({ method: 'DELETE', url: credentialsUrl(agentId, 'github'), cookie: owner });
    expect(again.statusCode).toBe(404);
    expect(again.json().error.code).toBe('not_found');
  });

  it('keeps credentials per agent', async () => {
    const a = await freshAgent();
    const b = await freshAgent();
    await put(a, 'slack', { clientId: 'slack-a', clientSecret: 'slack-secret-a' });
    expect(await list(b)).toEqual([]);
    expect((await h.request({ method: 'DELETE', url: credentialsUrl(b, 'slack'), cookie: owner })).statusCode).toBe(404);
    expect(await list(a)).toHaveLength(1);
  });

  it('seals secrets: the row holds neither secret in plain, and each opens only under its own label', async () => {
    const agentId = await freshAgent();
    const clientSecret = 'plain-client-secret-7f3a9c';
    const webhookSecret = 'plain-webhook-secret-e41b22';
    const res = await put(agentId, 'stripe', { clientId: 'ca_stripe', clientSecret, webhookSecret });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ service: 'stripe', configured: true, hasWebhookSecret: true });
    for (const body of [res.body, JSON.stringify(await list(agentId))]) {
      expect(body).not.toContain(clientSecret);
      expect(body).not.toContain(webhookSecret);
      expect(body).not.toContain('sb1.');
    }
    const [row] = await rowsOf(agentId);
    expect(row!.clientId).toBe('ca_stripe');
    for (const column of Object.values(row!)) {
      expect(String(column)).not.toContain(clientSecret);
      expect(String(column)).not.toContain(webhookSecret);
    }
    expect(row!.clientSecretSealed).toMatch(/^sb1\./);
    expect(row!.webhookSecretSealed).toMatch(/^sb1\./);
  });

  it('round-trips through the service with the server secret, under separate labels', async () => {
    const secret = 'credentials-test-server-secret-0123456789';
    const service = createCredentialsService({ db: h.db, secret });
    const agentId = await freshAgent();
    const [ownerRow] = await h.db.select({ userId: schema.members.userId }).from(schema.members).where(eq(schema.members.agentId, agentId));
    const user = { id: ownerRow!.userId, email: 'cred-owner@example.com' };
    await service.put(agentId, user, 'linear', { clientId: 'lin-id', clientSecret: 'lin-secret', webhookSecret: 'lin-hook' });
    expect(await service.open(agentId, 'linear')).toEqual({ clientId: 'lin-id', clientSecret: 'lin-secret' });
    expect(await service.webhookSecretOf(agentId, 'linear')).toBe('lin-hook');
    expect(await service.open(agentId, 'github')).toBeUndefined();
    expect(await service.webhookSecretOf(agentId, 'github')).toBeNull();
    const [row] = await rowsOf(agentId);
    expect(() => openWithSecret(secret, WEBHOOK_SECRET_LABEL, row!.clientSecretSealed!)).toThrow();
    expect(() => openWithSecret(secret, CLIENT_SECRET_LABEL, row!.webhookSecretSealed!)).toThrow();
    expect(() => openWithSecret('another-secret', CLIENT_SECRET_LABEL, row!.clientSecretSealed!)).toThrow();
  });

  it('keeps a stored webhook secret on a PUT without one, and clears it on clearWebhookSecret', async () => {
    const agentId = await freshAgent();
    expect((await put(agentId, 'slack', { clientId: 'slack-id', clientSecret: 's1', webhookSecret: 'hook-1' })).json()).toMatchObject({ hasWebhookSecret: true });
    const sealed = (await rowsOf(agentId))[0]!.webhookSecretSealed;
    expect((await put(agentId, 'slack', { clientId: 'slack-id', clientSecret: 's2' })).json()).toMatchObject({ hasWebhookSecret: true });
    expect((await rowsOf(agentId))[0]!.webhookSecretSealed).toBe(sealed);
    expect((await list(agentId))[0]!.hasWebhookSecret).toBe(true);
    expect((await put(agentId, 'slack', { clientId: 'slack-id', clientSecret: 's3', webhookSecret: 'hook-2' })).json()).toMatchObject({ hasWebhookSecret: true });
    expect((await rowsOf(agentId))[0]!.webhookSecretSealed).not.toBe(sealed);
    expect((await put(agentId, 'slack', { clientId: 'slack-id', clientSecret: 's4', clearWebhookSecret: true })).json()).toMatchObject({ hasWebhookSecret: false });
    expect((await rowsOf(agentId))[0]!.webhookSecretSealed).toBeNull();
    expect((await list(agentId))[0]!.hasWebhookSecret).toBe(false);
    // Clearing when nothing is stored is fine; so is a first PUT that clears.
    expect((await put(agentId, 'slack', { clientId: 'slack-id', clientSecret: 's5', clearWebhookSecret: true })).statusCode).toBe(200);
    expect((await put(agentId, 'linear', { clientId: 'lin', clientSecret: 'x', clearWebhookSecret: true })).json()).toEqual({ service: 'linear', configured: true, hasWebhookSecret: false });
  });

  it.each(WEBHOOK_SECRET_SERVICES)('%s takes webhookSecret and clearWebhookSecret without a client id and secret', async (service) => {
    const secret = 'credentials-test-server-secret-0123456789';
    const credentials = createCredentialsService({ db: h.db, secret });
    const agentId = await freshAgent();

    // The webhook secret alone: stored, and listed without an OAuth app.
    const set = await put(agentId, service, { webhookSecret: `${service}-hook` });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toEqual({ service, configured: false, hasWebhookSecret: true });
    expect(await list(agentId)).toEqual([{ service, configured: false, clientId: null, hasWebhookSecret: true, updatedAt: expect.any(String) }]);
    // Through the service (with its own server secret): the webhook endpoint reads the secret, the connect flow sees no app.
    const direct = await freshAgent();
    const [ownerRow] = await h.db.select({ userId: schema.members.userId }).from(schema.members).where(eq(schema.members.agentId, direct));
    await credentials.put(direct, { id: ownerRow!.userId, email: 'cred-owner@example.com' }, service, { webhookSecret: 'whsec_direct' });
    expect(await credentials.webhookSecretOf(direct, service)).toBe('whsec_direct');
    expect(await credentials.open(direct, service)).toBeUndefined();

    // Adding the OAuth app later keeps the webhook secret; a webhook-only PUT keeps the app.
    expect((await put(agentId, service, { clientId: `${service}-id`, clientSecret: 's' })).json()).toEqual({ service, configured: true, hasWebhookSecret: true });
    expect((await put(agentId, service, { webhookSecret: `${service}-hook-2` })).json()).toEqual({ service, configured: true, hasWebhookSecret: true });
    expect((await list(agentId))[0]).toMatchObject({ configured: true, clientId: `${service}-id`, hasWebhookSecret: true });

    // clearWebhookSecret alone removes only the webhook secret…
    expect((await put(agentId, service, { clearWebhookSecret: true })).json()).toEqual({ service, configured: true, hasWebhookSecret: false });
    expect((await list(agentId))[0]).toMatchObject({ configured: true, clientId: `${service}-id`, hasWebhookSecret: false });

    // …and on a row that held nothing else, leaves no row behind.
    const other = await freshAgent();
    await put(other, service, { webhookSecret: 'only-this' });
    expect((await put(other, service, { clearWebhookSecret: true })).json()).toEqual({ service, configured: false, hasWebhookSecret: false });
    expect(await rowsOf(other)).toEqual([]);
    expect((await put(other, service, { clearWebhookSecret: true })).json()).toEqual({ service, configured: false, hasWebhookSecret: false });
    expect(await rowsOf(other)).toEqual([]);
  });

  it.each([
    ['a connector without webhooks', 'github', { webhookSecret: 'h' }, 'webhookSecret'],
    ['an empty body', 'slack', {}, 'clientId'],
    ['clientId without clientSecret', 'slack', { clientId: 'id', webhookSecret: 'h' }, 'clientSecret'],
    ['clientSecret without clientId', 'stripe', { clientSecret: 's', clearWebhookSecret: true }, 'clientId'],
  ])('refuses %s (400 naming the field) and stores nothing', async (_name, service, payload, field) => {
    const agentId = await freshAgent();
    const res = await put(agentId, service, payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'invalid_request', details: { field } });
    expect(await rowsOf(agentId)).toEqual([]);
  });

  it('refuses webhookSecret together with clearWebhookSecret', async () => {
    const agentId = await freshAgent();
    const res = await put(agentId, 'slack', { clientId: 'id', clientSecret: 's', webhookSecret: 'h', clearWebhookSecret: true });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain('clearWebhookSecret');
    expect(await rowsOf(agentId)).toEqual([]);
  });

  describe.each(connectors.map((c) => ({ service: c.key, accepts: WEBHOOK_SECRET_SERVICES.includes(c.key) })))('webhook secret rules for $service', ({ service, accepts }) => {
    it.each(['webhookSecret', 'clearWebhookSecret'] as const)(`${accepts ? 'accepts' : 'refuses'} %s`, async (field) => {
      const agentId = await freshAgent();
      const payload = { clientId: `${service}-id`, clientSecret: `${service}-secret`, [field]: field === 'webhookSecret' ? 'whsec_abc' : true };
      const res = await put(agentId, service, payload);
      if (accepts) {
        expect(res.statusCode).toBe(200);
        expect(res.json()).toEqual({ service, configured: true, hasWebhookSecret: field === 'webhookSecret' });
      } else {
        expect(res.statusCode).toBe(400);
        const error = (res.json() as { error: { code: string; message: string; details: { field: string } } }).error;
        expect(error.code).toBe('invalid_request');
        expect(error.message).toContain(field);
        expect(error.message).toContain(service);
        expect(error.details.field).toBe(field);
        expect(await rowsOf(agentId)).toEqual([]);
        // Without the webhook field the same connector takes credentials.
        expect((await put(agentId, service, { clientId: `${service}-id`, clientSecret: `${service}-secret` })).statusCode).toBe(200);
      }
    });
  });

  describe('bad input is 400, never 500, and stores nothing', () => {
    const long = 'x'.repeat(10_000);
    const valid = { clientId: 'id', clientSecret: 'secret' };
    const cases: Array<{ name: string; service?: string; agent?: string; payload?: unknown; contentType?: string }> = [
      { name: 'unknown field', payload: { ...valid, scope: 'admin' } },
      { name: 'unknown field next to webhook fields', service: 'slack', payload: { ...valid, webhookSecret: 'h', extra: 1 } },
      { name: 'missing clientSecret', payload: { clientId: 'id' } },
      { name: 'missing clientId', payload: { clientSecret: 'secret' } },
      { name: 'empty clientId', payload: { ...valid, clientId: '' } },
      { name: 'blank clientId', payload: { ...valid, clientId: '   ' } },
      { name: 'empty clientSecret', payload: { ...valid, clientSecret: '' } },
      { name: 'numeric clientId', payload: { ...valid, clientId: 42 } },
      { name: 'object clientSecret', payload: { ...valid, clientSecret: { $gt: '' } } },
      { name: 'array clientSecret', payload: { ...valid, clientSecret: ['a'] } },
      { name: 'null clientId', payload: { ...valid, clientId: null } },
      { name: 'NUL in clientId', payload: { ...valid, clientId: 'a\u0000b' } },
      { name: '10k clientId', payload: { ...valid, clientId: long } },
      { name: '10k clientSecret', payload: { ...valid, clientSecret: long } },
      { name: '10k webhookSecret', service: 'slack', payload: { ...valid, webhookSecret: long } },
      { name: 'empty webhookSecret', service: 'slack', payload: { ...valid, webhookSecret: '' } },
      { name: 'numeric webhookSecret', service: 'slack', payload: { ...valid, webhookSecret: 1 } },
      { name: 'clearWebhookSecret false', service: 'slack', payload: { ...valid, clearWebhookSecret: false } },
      { name: 'clearWebhookSecret as string', service: 'slack', payload: { ...valid, clearWebhookSecret: 'true' } },
      { name: 'body is an array', payload: [valid] },
      { name: 'body is a string', payload: 'clientId=id', contentType: 'application/json' },
      { name: 'no body', payload: undefined },
      { name: 'unknown service', service: 'myspace', payload: valid },
      { name: '10k service', service: long.slice(0, 90), payload: valid },
      { name: 'service in upper case', service: 'GITHUB', payload: valid },
      { name: 'malformed agent id', agent: 'not-a-uuid', payload: valid },
      { name: 'agent id with SQL', agent: "1' OR '1'='1", payload: valid },
      { name: 'agent id one char short', agent: randomUUID().slice(0, 35), payload: valid },
    ];

    it.each(cases)('PUT: $name', async ({ service = 'github', agent, payload, contentType }) => {
      const agentId = await freshAgent();
      const res = await h.request({
        method: 'PUT',
        url: `/api/agents/${encodeURIComponent(agent ?? agentId)}/services/${encodeURIComponent(service)}/credentials`,
        ...(payload !== undefined ? { payload: typeof payload === 'string' ? payload : JSON.stringify(payload) } : {}),
        headers: { 'content-type': contentType ?? 'application/json' },
        cookie: owner,
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.code).toBe('invalid_request');
      expect(await rowsOf(agentId)).toEqual([]);
    });

    it('unknown service names it', async () => {
      const agentId = await freshAgent();
      const res = await put(agentId, 'myspace', valid);
      expect(res.json().error.message).toContain('myspace');
    });

    it.each([
      { name: 'malformed agent id', url: '/api/agents/nope/services/github/credentials' },
      { name: 'unknown service', url: `/api/agents/${randomUUID()}/services/myspace/credentials` },
    ])('DELETE: $name', async ({ url }) => {
      const res = await h.request({ method: 'DELETE', url, cookie: owner });
      expect(res.statusCode).toBe(400);
    });

    it.each([{ name: 'malformed agent id', url: '/api/agents/nope/services/credentials' }])('GET list: $name', async ({ url }) => {
      const res = await h.request({ method: 'GET', url, cookie: owner });
      expect(res.statusCode).toBe(400);
    });
  });
});
