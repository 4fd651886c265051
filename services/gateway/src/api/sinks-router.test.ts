import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema, SINK_SIGNATURE_HEADER, verifySinkSignature, type AuditEntry, type WebhookSinkBody } from '@portcullis/core';
import { ACTORS, createApiHarness, expectedStatus, signInRoleActors, withoutRequestId, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * `/api/agents/:id/sinks` (issue 20, decision 055): owner only, secrets write-only (never in an
 * answer), URL rule, lag from the sink's consumer, and the test delivery against a real receiver.
 */
const SECRET = 'sink-secret-never-shown-7f3a';
const API_KEY = 'otlp-api-key-never-shown-19c2';

let h: ApiHarness;
let roles: RoleActors;
let receiver: Server;
let receiverUrl: string;
const received: Array<{ signature: string | undefined; body: string }> = [];

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'sinks');
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      received.push({ signature: req.headers[SINK_SIGNATURE_HEADER] as string | undefined, body });
      res.writeHead(req.url === '/down' ? 503 : 204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await h?.close();
  receiver?.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

const owner = () => roles.cookieOf.owner!;
async function agentWithSink(): Promise<{ agentId: string; sinkId: string }> {
  const agentId = await roles.agentWithMembers();
  const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: owner(), payload: { kind: 'webhook', name: 'SIEM', url: `${receiverUrl}/hook`, secret: SECRET } });
  expect(res.statusCode, res.body).toBe(201);
  return { agentId, sinkId: res.json().id };
}
const sinkRows = (agentId: string) => h.db.select().from(schema.auditSinks).where(eq(schema.auditSinks.agentId, agentId)).orderBy(schema.auditSinks.id);

const ENDPOINTS = [
  { method: 'GET', path: '/api/agents/:id/sinks', success: 200 },
  { method: 'POST', path: '/api/agents/:id/sinks', payload: { kind: 'otlp', name: 'Collector', url: 'https://otel.example.com', headers: { 'x-api-key': API_KEY } }, success: 201 },
  { method: 'PUT', path: '/api/agents/:id/sinks/:sinkId', payload: { name: 'Renamed', secret: 'another-secret-of-16+' }, success: 200 },
  { method: 'POST', path: '/api/agents/:id/sinks/:sinkId/test', success: 200 },
  { method: 'DELETE', path: '/api/agents/:id/sinks/:sinkId', success: 204 },
] as const;

describe.each(ENDPOINTS)('$method $path', (endpoint) => {
  it.each(ACTORS)('as %s', async (actor) => {
    const { agentId, sinkId } = await agentWithSink();
    const before = await sinkRows(agentId);
    const send = (id: string) => h.request({
      method: endpoint.method, url: endpoint.path.replace(':id', id).replace(':sinkId', sinkId),
      ...('payload' in endpoint ? { payload: endpoint.payload } : {}),
      ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}),
    });
    const res = await send(agentId);
    const expected = expectedStatus(actor, 'owner', endpoint.success);
    expect(res.statusCode, res.body).toBe(expected);
    for (const secret of [SECRET, API_KEY, 'another-secret-of-16+', 'sb1.']) expect(res.body).not.toContain(secret);
    if (expected >= 400) {
      expect(await sinkRows(agentId)).toEqual(before);
      expect(res.json().error.code).toBe({ 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found' }[expected]);
    }
    if (expected === 404) expect(withoutRequestId((await send(randomUUID())).json())).toEqual(withoutRequestId(res.json()));
  });
});

describe('an owner\'s sinks', () => {
  it('lists a sink with its lag, header names and no secret; the test delivery is signed and says when the sink refuses', async () => {
    const { agentId, sinkId } = await agentWithSink();
    const otlp = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: owner(), payload: { kind: 'otlp', name: 'Collector', url: 'https://otel.example.com', headers: { 'x-api-key': API_KEY } } });
    expect(otlp.statusCode, otlp.body).toBe(201);
    expect(otlp.json()).toMatchObject({ kind: 'otlp', headerNames: ['x-api-key'], lag: 0, lastError: null });

    // Three entries for this agent reach the sink feed (the audit writer's job) and none is delivered: lag 3.
    const entry = (): AuditEntry => ({
      id: randomUUID(), timestamp: new Date().toISOString(), agentId, agentName: 'Guarded', memberId: 'm', memberName: 'm@x', memberKeyId: 'k', service: 'github',
      tool: 'github__get_me', action: 'a', resource: 'r', callerIp: '127.0.0.1', toolArgs: {}, decision: 'ALLOW', reason: 'ok', matchedPolicyIds: [],
      matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [], durationMs: 1, principal: 'p',
    });
    await h.bus.sinkFeed.publish([entry(), entry(), entry()]);
    const list = await h.request({ method: 'GET', url: `/api/agents/${agentId}/sinks`, cookie: owner() });
    expect(list.statusCode).toBe(200);
    expect(list.json().sinks.map((s: { name: string; lag: number }) => [s.name, s.lag])).toEqual([['SIEM', 3], ['Collector', 3]]);
    for (const secret of [SECRET, API_KEY, 'sb1.']) expect(list.body).not.toContain(secret);

    received.length = 0;
    const test = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks/${sinkId}/test`, cookie: owner() });
    expect(test.json()).toEqual({ delivered: true, error: null });
    const [got] = received;
    expect(verifySinkSignature(SECRET, got!.signature, got!.body)).toBe(true);
    const body = JSON.parse(got!.body) as WebhookSinkBody;
    expect(body).toMatchObject({ sinkId, test: true, entries: [{ agentId, tool: 'portcullis__sink_test' }] });

    const moved = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/sinks/${sinkId}`, cookie: owner(), payload: { url: `${receiverUrl}/down` } });
    expect(moved.statusCode).toBe(200);
    const failed = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks/${sinkId}/test`, cookie: owner() });
    expect(failed.json()).toEqual({ delivered: false, error: 'the sink answered HTTP 503' });

    expect((await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/sinks/${sinkId}`, cookie: owner() })).statusCode).toBe(204);
    expect(await h.bus.sinkFeed.lag(sinkId)).toBeUndefined();
    expect((await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/sinks/${sinkId}`, cookie: owner() })).statusCode).toBe(404);
  });

  it.each([
    [{ kind: 'webhook', name: 'x', url: 'http://siem.example.com/hook', secret: SECRET }, 'url', /https/],
    [{ kind: 'webhook', name: 'x', url: 'https://user:pw@siem.example.com/', secret: SECRET }, 'url', /password/],
    [{ kind: 'webhook', name: 'x', url: 'https://siem.example.com/', secret: 'short-7f3a' }, 'secret', /16/],
    [{ kind: 'webhook', name: 'x', url: 'https://siem.example.com/' }, 'secret', /./],
    [{ kind: 'otlp', name: 'x', url: 'https://otel.example.com', secret: SECRET }, 'secret', /./],
    [{ kind: 'otlp', name: 'x', url: 'https://otel.example.com', headers: { 'Content-Type': 'text/plain' } }, 'headers', /set by Portcullis/],
    [{ kind: 'otlp', name: 'x', url: 'https://otel.example.com', headers: { 'x-key': 'a\r\nb' } }, 'headers', /control/],
    [{ kind: 'syslog', name: 'x', url: 'https://otel.example.com' }, 'kind', /./],
  ])('refuses %j with a 400 naming %s, without echoing a secret', async (payload, field, message) => {
    const agentId = await roles.agentWithMembers();
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: owner(), payload });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.body).toContain(field);
    expect(res.json().error.message).toMatch(message);
    for (const secret of [SECRET, 'short-7f3a']) expect(res.body).not.toContain(secret);
    expect(await sinkRows(agentId)).toEqual([]);
  });

  it('refuses a secret on an OTLP sink and headers on a webhook sink when changing them', async () => {
    const { agentId, sinkId } = await agentWithSink();
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/sinks/${sinkId}`, cookie: owner(), payload: { headers: { 'x-a': 'b' } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/headers are for OTLP sinks/);
    const empty = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/sinks/${sinkId}`, cookie: owner(), payload: {} });
    expect(empty.statusCode).toBe(400);
  });
});
