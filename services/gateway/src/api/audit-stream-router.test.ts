import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq } from 'drizzle-orm';
import { createNatsBus, redactPolicyIdentities, schema, toAuditEntryMsg, type AuditEntry, type Bus } from '@portcullis/core';
import { deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { createApiHarness, openSseStream, signInRoleActors, type ApiHarness, type RoleActors, type SseEvent, type SseStream } from '../testing/index.ts';
import { toApiEntry } from './audit-router.ts';

const M1 = randomUUID();
const M2 = randomUUID();
const P1 = randomUUID();

function makeEntry(over: Partial<AuditEntry>): AuditEntry {
  return {
    id: randomUUID(), timestamp: new Date().toISOString(), agentId: 'unset', agentName: 'unset',
    memberId: M1, memberName: 'maria@example.com', memberKeyId: randomUUID(), service: 'github', tool: 'create_issue',
    action: 'GithubMCP::Action::"create_issue"', resource: 'GithubMCP::Service::"github"', callerIp: '127.0.0.1',
    toolArgs: { title: 'hello' }, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [],
    policyVersionIds: [], policyDbIds: [], durationMs: 3, principal: `Portcullis::Member::"${M1}"`, ...over,
  };
}

const entriesOf = (s: SseStream) => s.events.filter((e) => e.event === 'entry');
const idIs = (id: string) => (e: SseEvent) => e.event === 'entry' && e.id === id;

describe('GET /api/audit/stream (in-process bus)', () => {
  let h: ApiHarness;
  let base: string;
  let actors: RoleActors;
  /** Owned by `owner`, with `member` approved and `pending`/`rejected` rows. */
  let support: string;
  /** Owned by `owner` alone. */
  let devops: string;
  /** Owned by `outsider`. */
  let outsiders: string;
  /** Owned by `pending` and by `rejected` (who are not members of `support`). */
  let pendings: string;
  let rejecteds: string;
  const open: SseStream[] = [];

  const stream = async (cookie: string | undefined, query = ''): Promise<SseStream> => {
    const s = await openSseStream(`${base}/api/audit/stream${query}`, { headers: cookie ? { cookie } : {} });
    open.push(s);
    expect(s.status, s.errorBody).toBe(200);
    return s;
  };
  const publish = async (...entries: AuditEntry[]) => { for (const e of entries) await h.bus.publishAudit(e); };
  const at = (agentId: string, over: Partial<AuditEntry> = {}) =>
    makeEntry({ agentId, agentName: agentId === support ? 'Support Assistant' : agentId === devops ? 'DevOps Copilot' : 'Outsider bot', ...over });

  beforeAll(async () => {
    h = await createApiHarness({ AUDIT_STREAM_HEARTBEAT_MS: '200', AUDIT_STREAM_MAX_PER_USER: '20' });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    actors = await signInRoleActors(h, 'stream');
    support = await actors.agentWithMembers({ name: 'Support Assistant' });
    const created = async (cookie: string, name: string) => {
      const res = await h.request({ method: 'POST', url: '/api/agents', payload: { name }, cookie });
      expect(res.statusCode).toBe(201);
      return (res.json() as { id: string }).id;
    };
    devops = await created(actors.cookieOf.owner!, 'DevOps Copilot');
    outsiders = await created(actors.cookieOf.outsider!, 'Outsider bot');
    pendings = await created(actors.cookieOf.pending!, 'Own');
    rejecteds = await created(actors.cookieOf.rejected!, 'Own');
  });
  afterAll(async () => {
    for (const s of open) s.close();
    await h?.close();
  });

  it('answers 401 to an anonymous caller (before its query is read) and 400 in the error shape to bad filters', async () => {
    for (const query of ['', '?result=MAYBE']) {
      const res = await h.request({ method: 'GET', url: `/api/audit/stream${query}` });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ error: { code: 'unauthenticated' } });
    }
    const owner = actors.cookieOf.owner!;
    const bad: Array<[string, string]> = [
      ['result=MAYBE', 'result'],
      ['result=allow', 'result'],
      ['from=yesterday', 'from'],
      ['from=2026-13-01', 'from'],
      ['to=2026-10-01T25:00:00Z', 'to'],
      ['from=2026-10-02&to=2026-10-01', 'from'],
      ['limit=10', 'limit'],
      ['agent=' + 'x'.repeat(201), 'agent'],
      ["tool=x'%20OR%201=1&color=red", 'color'],
    ];
    for (const [query, field] of bad) {
      const res = await h.request({ method: 'GET', url: `/api/audit/stream?${query}`, cookie: owner });
      expect(res.statusCode, query).toBe(400);
      expect(res.headers['content-type']).toContain('application/json');
      const body = res.json() as { error: { code: string; message: string; details?: { field?: string } } };
      expect(body.error.code).toBe('invalid_request');
      // Unknown parameters are named in the message, the others in `details.field` too.
      expect(`${body.error.details?.field} ${body.error.message}`, query).toContain(field);
    }
  });

  it('pushes each call once — its complete record, in the shape GET /api/audit lists — as `entry` events with the entry id', async () => {
    const s = await stream(actors.cookieOf.owner);
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(s.headers.get('cache-control')).toContain('no-cache');

    const allowed = at(support, { durationMs: 0, stage: 'decision' });
    const completed: AuditEntry = { ...allowed, durationMs: 42, stage: 'complete', timestamp: allowed.timestamp.replace('Z', '+00:00') };
    const denied = at(support, { decision: 'DENY', reason: 'Nope', matchedPolicyIds: ['no-issues'], matchedPolicyNames: ['No issues'], policyDbIds: [P1], policyVersionIds: [randomUUID()] });
    await publish(allowed, completed, completed, denied);
    await s.waitFor(idIs(denied.id));

    const got = entriesOf(s);
    expect(got.map((e) => e.id)).toEqual([allowed.id, denied.id]);
    const first = JSON.parse(got[0]!.data) as Record<string, unknown>;
    expect(first).toEqual(toApiEntry(toAuditEntryMsg(completed)));
    expect(first).toMatchObject({ id: allowed.id, durationMs: 42, user: 'maria@example.com', timestamp: allowed.timestamp, toolArgs: { title: 'hello' } });
    expect(first).not.toHaveProperty('stage');
    // The policies' database ids (the `policy` filter), as GET /api/audit shows them (decision 071).
    expect(JSON.parse(got[1]!.data)).toMatchObject({ decision: 'DENY', reason: 'Nope', matchedPolicyIds: ['no-issues'], policyDbIds: [P1] });
  });

  it('honours every filter of GET /api/audit', async () => {
    const batch = () => [
      at(support, { tool: 'create_issue', memberId: M1 }),
      at(support, { tool: 'List_Issues', decision: 'DENY', memberId: M2, memberName: 'li@example.com', policyDbIds: [P1] }),
      at(support, { service: 'slack', tool: 'post_message', memberId: M1 }),
      at(devops, { service: 'githubx', tool: 'get_me', memberId: M2, memberName: 'li@example.com' }),
      at(devops, { timestamp: '2026-10-01T00:00:00.000Z' }),
      at(devops, { timestamp: '2026-10-01T23:59:59.999Z' }),
      at(devops, { timestamp: '2026-10-02T00:00:00.000Z' }),
    ];
    // Each case: the query, which of batch() it lets through (by index), and a last entry it
    // matches, so that once that arrives every earlier entry has been decided.
    const cases: Array<{ query: string; expected: number[]; sentinel: Partial<AuditEntry> & { agentId: string } }> = [
      { query: 'agent=SUPPORT', expected: [0, 1, 2], sentinel: { agentId: support } },
      { query: 'agent=copilot', expected: [3, 4, 5, 6], sentinel: { agentId: devops } },
      // The exact agent id (decision 045); with the name substring too, both must hold.
      { query: `agentId=${devops}`, expected: [3, 4, 5, 6], sentinel: { agentId: devops } },
      { query: `agentId=${support}&agent=copilot`, expected: [], sentinel: { agentId: support, agentName: 'Support copilot' } },
      { query: 'service=github', expected: [0, 1, 4, 5, 6], sentinel: { agentId: support } },
      { query: 'tool=ISSUE', expected: [0, 1, 4, 5, 6], sentinel: { agentId: devops, tool: 'update_issue' } },
      { query: 'result=DENY', expected: [1], sentinel: { agentId: devops, decision: 'DENY' } },
      { query: `member=${M1}`, expected: [0, 2, 4, 5, 6], sentinel: { agentId: support } },
      // An e-mail is compared as an id: only an entry whose member id is literally that text matches.
      { query: 'member=li%40example.com', expected: [], sentinel: { agentId: support, memberId: 'li@example.com' } },
      { query: `policy=${P1}`, expected: [1], sentinel: { agentId: devops, policyDbIds: [randomUUID(), P1] } },
      { query: 'from=2026-10-01&to=2026-10-01', expected: [4, 5], sentinel: { agentId: devops, timestamp: '2026-10-01T12:00:00+02:00' } },
      { query: 'from=2026-10-01T23:59:59.999Z', expected: [0, 1, 2, 3, 5, 6], sentinel: { agentId: devops } },
      // `to` is inclusive at the precision written: a minute is the whole minute (decision 003).
      { query: 'from=2026-10-01T23:59Z&to=2026-10-01T23:59Z', expected: [5], sentinel: { agentId: devops, timestamp: '2026-10-01T23:59:00.000Z' } },
      { query: 'to=2026-10-01T23:59:59Z', expected: [4, 5], sentinel: { agentId: devops, timestamp: '2026-10-01T23:59:59.000Z' } },
      { query: `service=github&result=ALLOW&member=${M1}`, expected: [0, 4, 5, 6], sentinel: { agentId: support } },
    ];
    for (const c of cases) {
      const s = await stream(actors.cookieOf.owner, `?${c.query}`);
      expect(s.status, c.query).toBe(200);
      const entries = batch();
      const sentinel = at(c.sentinel.agentId, c.sentinel);
      await publish(...entries, sentinel);
      await s.waitFor(idIs(sentinel.id));
      expect(entriesOf(s).map((e) => e.id), c.query).toEqual([...c.expected.map((i) => entries[i]!.id), sentinel.id]);
      s.close();
    }
  });

  it('shows a caller only the agents they own or are an approved member of', async () => {
    const { owner, member, pending, rejected, outsider } = actors.cookieOf;
    const streams = {
      owner: await stream(owner), member: await stream(member), pending: await stream(pending),
      rejected: await stream(rejected), outsider: await stream(outsider),
    };
    const onSupport = at(support);
    const onDevops = at(devops);
    const onOutsiders = at(outsiders);
    await publish(onSupport, onDevops, onOutsiders);

    await streams.owner.waitFor(idIs(onDevops.id)).catch((e) => { throw new Error(`owner: ${e}`); });
    await streams.member.waitFor(idIs(onSupport.id)).catch((e) => { throw new Error(`member: ${e}`); });
    await streams.outsider.waitFor(idIs(onOutsiders.id)).catch((e) => { throw new Error(`outsider: ${e}`); });
    // Entries reach a stream in publish order: once the outsider has its own, the others were decided.
    expect(entriesOf(streams.outsider).map((e) => e.id)).toEqual([onOutsiders.id]);
    expect(entriesOf(streams.owner).map((e) => e.id)).toEqual([onSupport.id, onDevops.id]);

    // Pending and rejected members see nothing: an agent of their own gives them a marker.
    const pendingOwn = at(pendings);
    const rejectedOwn = at(rejecteds);
    await publish(at(support), pendingOwn, rejectedOwn);
    await streams.pending.waitFor(idIs(pendingOwn.id));
    await streams.rejected.waitFor(idIs(rejectedOwn.id));
    expect(entriesOf(streams.pending).map((e) => e.id)).toEqual([pendingOwn.id]);
    expect(entriesOf(streams.rejected).map((e) => e.id)).toEqual([rejectedOwn.id]);
    for (const s of Object.values(streams)) s.close();
  });

  it('shows a trusted agent\'s entries to its non-owner members without policy identities, and no policy filter matches them (decision 022)', async () => {
    const trusted = await actors.agentWithMembers({ name: 'Trusted Ops', type: 'trusted' });
    const P9 = randomUUID(), V9 = randomUUID();
    const ownerStream = await stream(actors.cookieOf.owner, '?agent=trusted');
    const memberStream = await stream(actors.cookieOf.member);
    const memberByPolicy = await stream(actors.cookieOf.member, `?policy=${P9}`);
    const matched = {
      decision: 'DENY' as const, reason: 'Denied by policy "Night freeze"', matchedPolicyIds: ['night-freeze'], matchedPolicyNames: ['Night freeze'],
      policyDbIds: [P9], policyVersionIds: [V9],
    };
    const generated = makeEntry({ agentId: trusted, agentName: 'Trusted Ops', ...matched });
    const ownersMessage = makeEntry({ agentId: trusted, agentName: 'Trusted Ops', ...matched, reason: 'Ask the owner first' });
    // The same policy identities on a standard agent: the member sees them whole there.
    const onStandard = at(support, matched);
    await publish(generated, ownersMessage, onStandard);
    // Entries reach a stream in publish order: once the last has arrived, the others were decided.
    await memberStream.waitFor(idIs(onStandard.id));
    await memberByPolicy.waitFor(idIs(onStandard.id));
    await ownerStream.waitFor(idIs(ownersMessage.id));
    const data = (s: SseStream, id: string) => JSON.parse(s.events.find(idIs(id))!.data) as Record<string, unknown>;

    expect(data(memberStream, generated.id)).toEqual(toApiEntry(toAuditEntryMsg(redactPolicyIdentities(generated))));
    expect(data(memberStream, generated.id)).toMatchObject({ reason: 'Denied by policy', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [] });
    expect(data(memberStream, ownersMessage.id)).toMatchObject({ reason: 'Ask the owner first', matchedPolicyIds: [] });
    expect(data(memberStream, onStandard.id)).toMatchObject({ reason: 'Denied by policy "Night freeze"', matchedPolicyIds: ['night-freeze'] });
    const trustedFrames = memberStream.events.filter((e) => e.id === generated.id || e.id === ownersMessage.id).map((e) => e.data).join('\n');
    for (const secret of ['night-freeze', 'Night freeze', P9, V9]) expect(trustedFrames).not.toContain(secret);
    expect(entriesOf(memberByPolicy).map((e) => e.id)).toEqual([onStandard.id]);
    // The owner sees everything.
    expect(data(ownerStream, generated.id)).toEqual(toApiEntry(toAuditEntryMsg(generated)));
    expect(data(ownerStream, generated.id)).toMatchObject({ policyDbIds: [P9] });
    expect(entriesOf(ownerStream).map((e) => e.id)).toEqual([generated.id, ownersMessage.id]);
  });

  it('follows membership changes on open streams: an approved member starts, a removed member stops', async () => {
    const memberIdOf = async (email: string) => (await h.db.select({ id: schema.members.id }).from(schema.members)
      .innerJoin(schema.users, eq(schema.users.id, schema.members.userId))
      .where(and(eq(schema.members.agentId, support), eq(schema.users.email, email))))[0]!.id;
    const owner = actors.cookieOf.owner!;
    const memberStream = await stream(actors.cookieOf.member);
    const pendingStream = await stream(actors.cookieOf.pending);

    const approved = await h.request({ method: 'PUT', url: `/api/agents/${support}/members/${await memberIdOf(actors.email.pending)}/status`, payload: { status: 'approved' }, cookie: owner });
    expect(approved.statusCode, approved.body).toBe(200);
    const removed = await h.request({ method: 'DELETE', url: `/api/agents/${support}/members/${await memberIdOf(actors.email.member)}`, cookie: owner });
    expect(removed.statusCode, removed.body).toBe(204);

    // The change event refreshes each open stream's visibility on its own: publish until the
    // approved member receives an entry that the removed member does not.
    let settled: AuditEntry | undefined;
    for (let i = 0; i < 40 && !settled; i++) {
      const e = at(support);
      await publish(e);
      const received = await pendingStream.waitFor(idIs(e.id), 100).then(() => true, () => false);
      if (!received) continue;
      await new Promise((r) => setTimeout(r, 50));
      if (!entriesOf(memberStream).some((x) => x.id === e.id)) settled = e;
    }
    expect(settled, 'the newly approved member never received an entry the removed member did not').toBeDefined();
    // From then on the removed member gets nothing more.
    const marker = at(support);
    await publish(marker);
    await pendingStream.waitFor(idIs(marker.id));
    await new Promise((r) => setTimeout(r, 50));
    expect(entriesOf(memberStream).map((e) => e.id)).not.toContain(marker.id);
  });

  it('sends a heartbeat comment, and ends the stream when its dashboard session ends', async () => {
    const second = await h.signIn(actors.email.outsider);
    const s = await stream(second);
    const other = await stream(actors.cookieOf.outsider);
    await s.waitForComment((c) => c === 'keep-alive', 2_000);
    const out = await h.request({ method: 'POST', url: '/api/auth/logout', cookie: second });
    expect(out.statusCode).toBeLessThan(300);
    const end = await s.waitFor((e) => e.event === 'end', 3_000);
    expect(JSON.parse(end.data)).toMatchObject({ reason: 'session_ended' });
    await s.ended;
    // The user's other session keeps its stream.
    const e = at(outsiders);
    await publish(e);
    await other.waitFor(idIs(e.id));
  });
});

describe('GET /api/audit/stream limits and shutdown', () => {
  let h: ApiHarness;
  let base: string;
  let cookie: string;
  let agentId: string;
  let closed = false;

  beforeAll(async () => {
    h = await createApiHarness({ AUDIT_STREAM_MAX_PER_USER: '2', AUDIT_STREAM_QUEUE_LIMIT: '5' });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    cookie = await h.signIn('limits@example.com');
    const res = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Busy' }, cookie });
    agentId = (res.json() as { id: string }).id;
  });
  afterAll(async () => { if (!closed) await h?.close(); });

  const open = (paused = false) => openSseStream(`${base}/api/audit/stream`, { headers: { cookie }, paused });

  it('refuses a user\'s streams beyond the cap with 429 in the error shape, and takes one again once a stream closes', async () => {
    const a = await open();
    const b = await open();
    expect([a.status, b.status]).toEqual([200, 200]);
    const c = await open();
    expect(c.status).toBe(429);
    expect(JSON.parse(c.errorBody)).toMatchObject({ error: { code: 'rate_limited', details: { limit: 2 } } });
    a.close();
    let again: SseStream | undefined;
    for (let i = 0; i < 50 && again?.status !== 200; i++) {
      again?.close();
      again = await open();
      if (again.status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(again!.status).toBe(200);
    again!.close();
    b.close();
  });

  it('drops a client that cannot keep up, with a final `end` event (overflow)', async () => {
    let s: SseStream | undefined;
    for (let i = 0; i < 50 && s?.status !== 200; i++) {
      s = await open(true);
      if (s.status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(s!.status).toBe(200);
    // ~10 MB of entries in one burst to a client that reads nothing: the socket fills, then the queue of 5.
    const blob = 'x'.repeat(100_000);
    const burst = Array.from({ length: 100 }, () => makeEntry({ agentId, agentName: 'Busy', toolArgs: { blob } }));
    await Promise.all(burst.map((e) => h.bus.publishAudit(e)));
    s!.resume();
    const end = await s!.waitFor((e) => e.event === 'end', 10_000);
    expect(JSON.parse(end.data)).toMatchObject({ reason: 'overflow' });
    expect(entriesOf(s!).length).toBeLessThan(burst.length);
    await s!.ended;
  });

  it('closes open streams on shutdown (`end` with reason shutdown) instead of hanging', async () => {
    let s: SseStream | undefined;
    for (let i = 0; i < 50 && s?.status !== 200; i++) {
      s = await open();
      if (s.status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(s!.status).toBe(200);
    closed = true;
    // (Without the preClose hook this would wait for the client to hang up, i.e. forever.)
    const closing = h.close();
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('close() hung with an open stream')), 10_000));
    await Promise.race([closing, timeout]);
    const end = await s!.waitFor((e) => e.event === 'end', 1_000);
    expect(JSON.parse(end.data)).toMatchObject({ reason: 'shutdown' });
  });
});

describe('logging out ends that session\'s live streams at once, on every replica (two gateways, one real NATS)', () => {
  const prefix = uniqueSubjectPrefix('session_ends');
  let busA: Bus;
  let busB: Bus;
  let h: ApiHarness;
  let baseB: string;
  const open: SseStream[] = [];

  beforeAll(async () => {
    busA = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix, name: 'gateway-a' });
    busB = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix, name: 'gateway-b' });
    // A heartbeat far longer than the test: only the logout itself can end the streams in time.
    h = await createApiHarness({ AUDIT_STREAM_HEARTBEAT_MS: '120000' }, { bus: busA });
    const replicaB = await h.replica(busB);
    baseB = await replicaB.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    for (const s of open) s.close();
    await h?.close();
    await busA?.close();
    await busB?.close();
    await deleteTestStreams(TEST_NATS_URL, prefix);
  });

  const streamOnB = async (path: string, cookie: string) => {
    const s = await openSseStream(`${baseB}${path}`, { headers: { cookie } });
    open.push(s);
    expect(s.status, s.errorBody).toBe(200);
    await s.waitForComment((c) => c === 'connected');
    return s;
  };
  const endedWithin = (s: SseStream, ms: number) => Promise.race([
    s.ended.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms)),
  ]);
  const entryOn = (agentId: string): AuditEntry => makeEntry({ agentId, agentName: 'Replicated' });

  it('a logout on replica A ends the audit and approval streams the session opened on replica B within a second; later entries reach only the user\'s other session', async () => {
    const leaving = await h.signIn('two-replicas@example.com');
    const staying = await h.signIn('two-replicas@example.com');
    const created = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Replicated' }, cookie: leaving });
    expect(created.statusCode).toBe(201);
    const agentId = created.json().id as string;

    const audit = await streamOnB('/api/audit/stream', leaving);
    const approvals = await streamOnB(`/api/agents/${agentId}/call-approvals/events`, leaving);
    const other = await streamOnB('/api/audit/stream', staying);

    // The streams are live across replicas: an entry published through A reaches B's streams.
    const before = entryOn(agentId);
    await busA.publishAudit(before);
    await audit.waitFor(idIs(before.id));
    await other.waitFor(idIs(before.id));

    const loggedOutAt = Date.now();
    expect((await h.request({ method: 'POST', url: '/api/auth/logout', cookie: leaving })).statusCode).toBe(200);
    expect(await endedWithin(audit, 1_500), 'the audit stream ended').toBe(true);
    expect(await endedWithin(approvals, 1_500), 'the approvals stream ended').toBe(true);
    expect(Date.now() - loggedOutAt).toBeLessThan(1_500);
    for (const s of [audit, approvals]) {
      const last = s.events.at(-1)!;
      expect(last.event).toBe('end');
      expect(JSON.parse(last.data)).toMatchObject({ reason: 'session_ended' });
    }

    // Nothing after the logout: the next entry reaches the user's other session only.
    const after = entryOn(agentId);
    await busA.publishAudit(after);
    await other.waitFor(idIs(after.id));
    expect(audit.events.some(idIs(after.id))).toBe(false);
    expect(await endedWithin(other, 200), 'the other session\'s stream goes on').toBe(false);
  });

  it('revoking a session from another one (DELETE /api/users/me/sessions/:id) ends its streams at once too', async () => {
    const revoked = await h.signIn('revoked-stream@example.com');
    const revoker = await h.signIn('revoked-stream@example.com');
    const stream = await streamOnB('/api/audit/stream', revoked);
    const sessions = (await h.request({ method: 'GET', url: '/api/users/me/sessions', cookie: revoker })).json() as { sessions: Array<{ id: string; current: boolean }> };
    const target = sessions.sessions.find((s) => !s.current)!;
    expect((await h.request({ method: 'DELETE', url: `/api/users/me/sessions/${target.id}`, cookie: revoker })).statusCode).toBe(204);
    expect(await endedWithin(stream, 1_500)).toBe(true);
    expect(JSON.parse(stream.events.at(-1)!.data)).toMatchObject({ reason: 'session_ended' });
  });
});
