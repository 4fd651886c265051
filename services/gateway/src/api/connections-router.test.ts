import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';

describe('DELETE /api/agents/:id/connect/:service', () => {
  let h: ApiHarness;
  let owner: string;
  let agentId: string;
  let memberId: string;

  beforeAll(async () => {
    h = await createApiHarness();
    owner = await h.signIn('conn-owner@example.com');
    const created = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Connections' }, cookie: owner });
    agentId = created.json().id;
    memberId = created.json().membership.id;
  });
  afterAll(async () => { await h.close(); });

  const connect = (service: string) => h.db.insert(schema.connections).values({ memberId, service, identityInfo: { login: 'o' }, sealedTokens: 'sealed' });
  const rows = () => h.db.select().from(schema.connections).where(eq(schema.connections.memberId, memberId));

  it('removes the caller\'s own connection, announces it, and answers 404 the second time', async () => {
    await connect('github');
    await connect('slack');
    h.events.length = 0;
    const res = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/connect/github`, cookie: owner });
    expect(res.statusCode).toBe(204);
    expect((await rows()).map((r) => r.service)).toEqual(['slack']);
    expect(h.events).toContainEqual({ kind: 'agent.changed', agentId });
    const again = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/connect/github`, cookie: owner });
    expect(again.statusCode).toBe(404);
    expect(again.json()).toMatchObject({ error: { code: 'not_found' } });
  });

  it('never touches another member\'s connection and hides the agent from outsiders', async () => {
    const outsider = await h.signIn('conn-outsider@example.com');
    const res = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/connect/slack`, cookie: outsider });
    expect(res.statusCode).toBe(404);
    expect((await rows()).map((r) => r.service)).toEqual(['slack']);
    expect((await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/connect/slack` })).statusCode).toBe(401);
  });

  it.each([
    ['an unknown connector', () => `/api/agents/${agentId}/connect/myspace`],
    ['a malformed agent id', () => '/api/agents/not-a-uuid/connect/slack'],
  ])('answers %s with 400 and changes nothing', async (_name, url) => {
    const res = await h.request({ method: 'DELETE', url: url(), cookie: owner });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    expect((await rows()).map((r) => r.service)).toEqual(['slack']);
  });
});

describe('POST /api/agents/:id/connect/:service takes no body', () => {
  let h: ApiHarness;
  let owner: string;
  let agentId: string;
  beforeAll(async () => {
    h = await createApiHarness();
    owner = await h.signIn('connect-body@example.com');
    agentId = (await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Connect body' }, cookie: owner })).json().id;
  });
  afterAll(async () => { await h?.close(); });

  const stateRows = async () => (await h.db.select().from(schema.oauthFlows)).length;

  it.each([
    ['an object with fields', { 'content-type': 'application/json' }, '{"redirect":"https://evil.example"}'],
    ['a JSON array', { 'content-type': 'application/json' }, '[1,2]'],
    ['a JSON string', { 'content-type': 'application/json' }, '"hello"'],
    ['plain text', { 'content-type': 'text/plain' }, 'hello'],
  ])('refuses %s with 400 invalid_request and starts nothing', async (_name, headers, payload) => {
    const before = await stateRows();
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/connect/github`, cookie: owner, headers, payload });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    expect(await stateRows()).toBe(before);
  });

  it('takes no body or an empty object as before (here: the connector is not enabled, 409)', async () => {
    for (const payload of [undefined, {}]) {
      const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/connect/github`, cookie: owner, ...(payload ? { payload } : {}) });
      expect(res.statusCode, res.body).toBe(409);
    }
  });
});
