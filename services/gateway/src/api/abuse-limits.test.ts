import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { schema } from '@portcullis/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { loadGatewayConfig } from '../config.ts';
import { createSharedLimiters } from '../plugins/rate-limits.ts';
import { composeGateway } from '../gateway.ts';
import { createApiHarness, HARNESS_ORIGIN, latestMail, readOutbox, type ApiHarness } from '../testing/index.ts';

/**
 * Decision 026: invites per inviting user and per client IP (across agents), and agents per
 * user, limited per rolling hour in Postgres — so deleting an agent gives no fresh allowance
 * and a second gateway replica counts the same events.
 */
const LIMITS = { RATE_LIMIT_INVITES_PER_USER: '3', RATE_LIMIT_INVITES_PER_IP: '5', RATE_LIMIT_AGENTS_PER_USER: '2' };

type Response = Awaited<ReturnType<ApiHarness['request']>>;

function expectLimited(res: Response) {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json()).toMatchObject({ error: { code: 'rate_limited', message: expect.any(String), requestId: expect.any(String), details: { retryAfterSeconds: expect.any(Number) } } });
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(60 * 60);
  expect(res.body).not.toMatch(/\n\s+at /);
}

describe('abuse limits on invites and agent creation', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(LIMITS); });
  afterAll(async () => { await h?.close(); });

  const createAgent = (cookie: string, name: string, remoteAddress = '10.9.0.1') =>
    h.request({ method: 'POST', url: '/api/agents', payload: { name }, cookie, remoteAddress });
  async function agentOf(cookie: string, name: string, remoteAddress?: string): Promise<string> {
    const res = await createAgent(cookie, name, remoteAddress);
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  }
  const invite = (cookie: string, agentId: string, email: string, remoteAddress: string) =>
    h.request({ method: 'POST', url: `/api/agents/${agentId}/invite`, payload: { email }, cookie, remoteAddress });
  const mailsTo = (email: string) => readOutbox(h.outboxDir).filter((m) => m.to === email).length;
  const invitesTo = async (email: string) => (await h.db.select().from(schema.invites).where(eq(schema.invites.email, email))).length;

  it('limits invites per inviting user across all their agents; deleting an agent gives no fresh allowance', async () => {
    const ada = await h.signIn('limit-ada@example.com');
    const [first, second] = [await agentOf(ada, 'First'), await agentOf(ada, 'Second')];
    expect((await invite(ada, first, 'u1@example.com', '10.1.0.1')).statusCode).toBe(201);
    expect((await invite(ada, first, 'u2@example.com', '10.1.0.2')).statusCode).toBe(201);
    expect((await invite(ada, second, 'u3@example.com', '10.1.0.3')).statusCode).toBe(201);

    expectLimited(await invite(ada, second, 'u4@example.com', '10.1.0.4'));
    expect(mailsTo('u4@example.com')).toBe(0);
    expect(await invitesTo('u4@example.com')).toBe(0);

    // The invites of a deleted agent still count.
    expect((await h.request({ method: 'DELETE', url: `/api/agents/${first}`, cookie: ada })).statusCode).toBe(204);
    expectLimited(await invite(ada, second, 'u4@example.com', '10.1.0.5'));

    // Someone else is not affected.
    const bo = await h.signIn('limit-bo@example.com');
    expect((await invite(bo, await agentOf(bo, 'Bo'), 'u4@example.com', '10.1.0.6')).statusCode).toBe(201);
  });

  it('counts a resent invite like a new one (decision 038): past the limit nothing is stored, replaced or mailed', async () => {
    const bea = await h.signIn('limit-bea@example.com');
    const agentId = await agentOf(bea, 'Resends');
    expect((await invite(bea, agentId, 'r1@example.com', '10.3.0.1')).statusCode).toBe(201);
    const resend = async (remoteAddress: string) => {
      const [row] = await h.db.select().from(schema.invites).where(eq(schema.invites.email, 'r1@example.com'));
      return h.request({ method: 'POST', url: `/api/agents/${agentId}/invites/${row!.id}/resend`, cookie: bea, remoteAddress });
    };
    expect((await resend('10.3.0.2')).statusCode).toBe(200);
    expect((await resend('10.3.0.3')).statusCode).toBe(200);
    const before = await h.db.select().from(schema.invites).where(eq(schema.invites.email, 'r1@example.com'));
    expectLimited(await resend('10.3.0.4'));
    expect(mailsTo('r1@example.com')).toBe(3);
    expect(await h.db.select().from(schema.invites).where(eq(schema.invites.email, 'r1@example.com'))).toEqual(before);
  });

  it('limits invites per client IP across users and agents', async () => {
    const ip = '10.2.0.1';
    let sent = 0;
    for (const who of ['ip-a', 'ip-b']) {
      const cookie = await h.signIn(`${who}@example.com`);
      const agentId = await agentOf(cookie, `Agent of ${who}`);
      for (let i = 0; i < 3 && sent < 5; i++, sent++) {
        expect((await invite(cookie, agentId, `${who}-${i}@example.com`, ip)).statusCode).toBe(201);
      }
    }
    const third = await h.signIn('ip-c@example.com');
    const thirdAgent = await agentOf(third, 'Agent of ip-c');
    expectLimited(await invite(third, thirdAgent, 'victim@example.com', ip));
    expect(mailsTo('victim@example.com')).toBe(0);
    // A refused invite counts against no limit: ip-c still has all three of their own.
    // IPv6: one /64 is one address for the count.
    for (let i = 0; i < 3; i++) expect((await invite(third, thirdAgent, `v6-${i}@example.com`, `2001:db8:7:1::${i + 1}`)).statusCode).toBe(201);
    const fourth = await h.signIn('ip-d@example.com');
    const fourthAgent = await agentOf(fourth, 'Agent of ip-d');
    for (let i = 0; i < 2; i++) expect((await invite(fourth, fourthAgent, `v6d-${i}@example.com`, `2001:db8:7:1:abcd::${i + 1}`)).statusCode).toBe(201);
    expectLimited(await invite(fourth, fourthAgent, 'v6d-9@example.com', '2001:db8:7:1:ffff::9'));
    expect((await invite(third, thirdAgent, 'elsewhere@example.com', '10.2.0.2')).statusCode).toBe(429); // ip-c's own three are spent
    expect((await invite(fourth, fourthAgent, 'elsewhere@example.com', '10.2.0.2')).statusCode).toBe(201);
  });

  it('limits agent creation per user; deleting agents gives no fresh allowance', async () => {
    const cy = await h.signIn('limit-cy@example.com');
    const a = await agentOf(cy, 'One');
    await agentOf(cy, 'Two');
    const refused = await createAgent(cy, 'Three');
    expectLimited(refused);
    expect((await h.request({ method: 'DELETE', url: `/api/agents/${a}`, cookie: cy })).statusCode).toBe(204);
    expectLimited(await createAgent(cy, 'Three'));
    const owned = await h.db.select().from(schema.agents).where(eq(schema.agents.name, 'Three'));
    expect(owned).toEqual([]);
    // Another user creates as usual.
    expect((await createAgent(await h.signIn('limit-di@example.com'), 'Three')).statusCode).toBe(201);
  });

  it('quotes the agent name as plain text, never as a link, and shows who sent the invite', async () => {
    const eve = await h.signIn('limit-eve@example.com');
    const name = 'URGENT: verify your payment at https://evil.example/login or www.evil.example';
    const agentId = await agentOf(eve, name);
    const res = await invite(eve, agentId, 'target@example.com', '10.3.0.1');
    expect(res.statusCode).toBe(201);
    const mail = latestMail(h.outboxDir, 'target@example.com');
    expect(mail.subject).toBe('limit-eve@example.com invited you to an agent on Portcullis');
    expect(mail.text).toContain('limit-eve@example.com invited you (target@example.com)');
    expect(mail.text).toContain('"URGENT: verify your payment at https[:]//evil[.]example/login or www[.]evil[.]example"');
    expect(mail.text).not.toContain('evil.example');
    // The invite URL is the only URL in the message.
    const urls = mail.text.match(/\b(?:https?:\/\/|www\.)\S+/g);
    expect(urls).toEqual([(res.json() as { url: string }).url]);
    expect(mail.link).toBe((res.json() as { url: string }).url);
  });
});

describe('abuse limits hold across gateway replicas', () => {
  let h: ApiHarness;
  let replica: { app: FastifyInstance; release(): Promise<void> };
  beforeAll(async () => {
    h = await createApiHarness(LIMITS);
    // A second gateway on the same database, as a second replica behind a load balancer.
    const config = loadGatewayConfig({
      NODE_ENV: 'test', DATA_DIR: h.outboxDir, MAIL_URL: `file://${h.outboxDir}`, PUBLIC_URL: HARNESS_ORIGIN, LOG_LEVEL: 'silent',
      POLICY_URL: '127.0.0.1:1', AUDIT_URL: '127.0.0.1:1', ...LIMITS,
    }, randomBytes(32).toString('base64url'));
    replica = await composeGateway(config, { db: h.db, bus: h.bus, dbPing: async () => undefined });
    await replica.app.ready();
  });
  afterAll(async () => {
    await replica?.app.close();
    await replica?.release();
    await h?.close();
  });

  it('counts agent creations and invites made through either replica together', async () => {
    const cookie = await h.signIn('replicas@example.com');
    const viaReplica = (method: 'POST', url: string, payload: Record<string, unknown>) =>
      replica.app.inject({ method, url, payload, headers: { origin: HARNESS_ORIGIN, cookie }, remoteAddress: '10.4.0.1' });
    const first = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'On one' }, cookie });
    expect(first.statusCode).toBe(201);
    expect((await viaReplica('POST', '/api/agents', { name: 'On two' })).statusCode).toBe(201);
    expectLimited(await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Third' }, cookie }));
    expectLimited(await viaReplica('POST', '/api/agents', { name: 'Third' }));

    const agentId = (first.json() as { id: string }).id;
    expect((await h.request({ method: 'POST', url: `/api/agents/${agentId}/invite`, payload: { email: 'r1@example.com' }, cookie })).statusCode).toBe(201);
    expect((await viaReplica('POST', `/api/agents/${agentId}/invite`, { email: 'r2@example.com' })).statusCode).toBe(201);
    expect((await h.request({ method: 'POST', url: `/api/agents/${agentId}/invite`, payload: { email: 'r3@example.com' }, cookie })).statusCode).toBe(201);
    expectLimited(await viaReplica('POST', `/api/agents/${agentId}/invite`, { email: 'r4@example.com' }));
  });
});

describe('shared limiter window', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(); });
  afterAll(async () => { await h?.close(); });

  it('is a rolling window: Retry-After counts down to the oldest event, which is deleted once it has left', async () => {
    let clock = Date.parse('2030-01-01T10:00:00Z');
    const limiter = createSharedLimiters({ db: h.db, now: () => clock })(
      { limit: { max: 2, windowMs: 60 * 60_000 }, action: 'window-test', what: 'tests', subjectOf: () => 'user:window' },
    );
    const headers: Record<string, string> = {};
    const reply = { header: (name: string, value: string) => { headers[name] = value; } } as unknown as FastifyReply;
    const hit = () => limiter({} as FastifyRequest, reply).then(() => 'ok', (err: { code?: string }) => err.code);

    expect(await hit()).toBe('ok');
    clock += 20 * 60_000;
    expect(await hit()).toBe('ok');
    clock += 10 * 60_000;
    expect(await hit()).toBe('rate_limited');
    expect(headers['retry-after']).toBe(String(30 * 60)); // the first event leaves at 11:00
    clock += 30 * 60_000 + 1;
    expect(await hit()).toBe('ok');
    const rows = await h.db.select().from(schema.rateLimitEvents).where(eq(schema.rateLimitEvents.action, 'window-test'));
    expect(rows.map((r) => r.occurredAt.toISOString())).toEqual(['2030-01-01T10:20:00.000Z', '2030-01-01T11:00:00.001Z']);
  });
});
