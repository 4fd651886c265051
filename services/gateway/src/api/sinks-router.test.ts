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

describe('Send test (issue 29)', () => {
  it('takes no body but {} and refuses anything else with 400, without sending', async () => {
    const { agentId, sinkId } = await agentWithSink();
    const url = `/api/agents/${agentId}/sinks/${sinkId}/test`;
    received.length = 0;
    for (const [payload, headers] of [[{ verbose: true }, {}], ['hello', { 'content-type': 'text/plain' }], [[], {}]] as const) {
      const res = await h.request({ method: 'POST', url, cookie: owner(), payload: payload as never, headers });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.code).toBe('invalid_request');
    }
    expect(received).toEqual([]);
    expect((await h.request({ method: 'POST', url, cookie: owner(), payload: {} })).json()).toEqual({ delivered: true, error: null });
    expect((await h.request({ method: 'POST', url, cookie: owner() })).json()).toEqual({ delivered: true, error: null });
  });
});

/** An internal service that answers 500 with what it should never show: its error page names a secret. */
const LEAKED = 'db_password=hunter2-internal-4c1e';
let leaky: Server;
let leakyUrl: string;
beforeAll(async () => {
  leaky = createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(500, { 'content-type': 'text/plain' }).end(`error: ${LEAKED}`)); });
  await new Promise<void>((resolve) => leaky.listen(0, '127.0.0.1', resolve));
  leakyUrl = `http://127.0.0.1:${(leaky.address() as AddressInfo).port}/leak`;
});
afterAll(async () => {
  leaky?.closeAllConnections();
  await new Promise<void>((resolve) => leaky.close(() => resolve()));
});

describe('what Send test tells the owner (issue 29)', () => {
  it('is the status only, never the answer\'s bytes, for a destination not on SINK_ALLOWED_HOSTS (development: loopback allowed)', async () => {
    const agentId = await roles.agentWithMembers();
    const created = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: owner(), payload: { kind: 'webhook', name: 'x', url: leakyUrl, secret: SECRET } });
    expect(created.statusCode, created.body).toBe(201);
    const test = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks/${created.json().id}/test`, cookie: owner() });
    expect(test.json()).toEqual({ delivered: false, error: 'the sink answered HTTP 500' });
    expect(test.body).not.toContain('hunter2');
  });

  it('names the error class of a failed connection only', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const agentId = await roles.agentWithMembers();
    const created = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: owner(), payload: { kind: 'webhook', name: 'x', url: `http://127.0.0.1:${port}/`, secret: SECRET } });
    const test = await h.request({ method: 'POST', url: `/api/agents/${agentId}/sinks/${created.json().id}/test`, cookie: owner() });
    expect(test.json()).toEqual({ delivered: false, error: 'could not reach the sink: connection refused' });
  });
});

/** Internal destinations in every form the URL parser takes (issue 29): none may be a sink in production. */
const INTERNAL_URLS = [
  'https://127.0.0.1:8443/hook', 'https://localhost/hook', 'https://LOCALHOST./hook', 'https://api.localhost/', 'https://0.0.0.0/', 'https://0/',
  'https://2130706433/', 'https://0x7f.1/', 'https://017700000001/', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/',
  'https://[::127.0.0.1]/', 'https://10.1.2.3/', 'https://172.16.0.1/', 'https://192.168.1.1/', 'https://169.254.169.254/latest/meta-data/',
  'https://100.64.0.1/', 'https://[fe80::1]/', 'https://[fd00::1]/', 'https://[fc00::1]/', 'https://224.0.0.1/', 'https://255.255.255.255/',
  'https://[ff02::1]/', 'https://[64:ff9b::a9fe:a9fe]/', 'https://[2002:a00:1::]/', 'https://[::ffff:10.0.0.1]/',
];

describe('in production (issue 29)', () => {
  let prod: ApiHarness;
  let prodRoles: RoleActors;
  beforeAll(async () => {
    prod = await createApiHarness({ NODE_ENV: 'production' });
    prodRoles = await signInRoleActors(prod, 'sinks-prod');
  });
  afterAll(async () => { await prod?.close(); });

  it.each(INTERNAL_URLS)('refuses %s as a sink\'s URL with a 400 naming url, on create and on change', async (url) => {
    const agentId = await prodRoles.agentWithMembers();
    const create = await prod.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: prodRoles.cookieOf.owner!, payload: { kind: 'otlp', name: 'x', url, headers: { authorization: 'Bearer k' } } });
    expect(create.statusCode, create.body).toBe(400);
    expect(create.json().error).toMatchObject({ code: 'invalid_request', details: { field: 'url' } });
    const ok = await prod.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: prodRoles.cookieOf.owner!, payload: { kind: 'webhook', name: 'x', url: 'https://siem.example.com/hook', secret: SECRET } });
    expect(ok.statusCode, ok.body).toBe(201);
    const before = await prod.db.select().from(schema.auditSinks).where(eq(schema.auditSinks.agentId, agentId));
    const change = await prod.request({ method: 'PUT', url: `/api/agents/${agentId}/sinks/${ok.json().id}`, cookie: prodRoles.cookieOf.owner!, payload: { url } });
    expect(change.statusCode, change.body).toBe(400);
    expect(change.json().error).toMatchObject({ code: 'invalid_request', details: { field: 'url' } });
    expect(await prod.db.select().from(schema.auditSinks).where(eq(schema.auditSinks.agentId, agentId))).toEqual(before);
  });
});

describe('in production with SINK_ALLOWED_HOSTS=127.0.0.1 (issue 29)', () => {
  let allowed: ApiHarness;
  let allowedRoles: RoleActors;
  beforeAll(async () => {
    allowed = await createApiHarness({ NODE_ENV: 'production', SINK_ALLOWED_HOSTS: '127.0.0.1', RATE_LIMIT_SINK_TESTS_PER_AGENT: '2', RATE_LIMIT_SINK_TESTS_PER_USER: '3' });
    allowedRoles = await signInRoleActors(allowed, 'sinks-allowed');
  });
  afterAll(async () => { await allowed?.close(); });

  const sinkOn = async (roles: RoleActors, cookie: string) => {
    const agentId = await roles.agentWithMembers();
    const created = await allowed.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie, payload: { kind: 'webhook', name: 'x', url: leakyUrl, secret: SECRET } });
    expect(created.statusCode, created.body).toBe(201);
    return `/api/agents/${agentId}/sinks/${created.json().id}/test`;
  };

  it('takes plain http to a listed internal collector, and shows the owner its answer', async () => {
    const test = await allowed.request({ method: 'POST', url: await sinkOn(allowedRoles, allowedRoles.cookieOf.owner!), cookie: allowedRoles.cookieOf.owner! });
    expect(test.json()).toEqual({ delivered: false, error: `the sink answered HTTP 500: error: ${LEAKED}` });
    // Other loopback addresses are not listed.
    const agentId = await allowedRoles.agentWithMembers();
    const other = await allowed.request({ method: 'POST', url: `/api/agents/${agentId}/sinks`, cookie: allowedRoles.cookieOf.owner!, payload: { kind: 'webhook', name: 'x', url: 'https://127.0.0.2/', secret: SECRET } });
    expect(other.statusCode, other.body).toBe(400);
  });

  it('limits Send test per agent and per user: 429 with Retry-After beyond', async () => {
    const tester = await signInRoleActors(allowed, 'sinks-tester');
    const cookie = tester.cookieOf.owner!;
    const first = await sinkOn(tester, cookie);
    const second = await sinkOn(tester, cookie);
    const send = (url: string) => allowed.request({ method: 'POST', url, cookie });
    expect((await send(first)).statusCode).toBe(200);
    expect((await send(first)).statusCode).toBe(200);
    const perAgent = await send(first);
    expect(perAgent.statusCode, perAgent.body).toBe(429);
    expect(Number(perAgent.headers['retry-after'])).toBeGreaterThan(0);
    expect(perAgent.json().error.code).toBe('rate_limited');
    expect((await send(second)).statusCode).toBe(200);
    const perUser = await send(second);
    expect(perUser.statusCode, perUser.body).toBe(429);
    expect(perUser.json().error.message).toMatch(/by you/);
  });
});
