import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq, inArray } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';

const { connections, invites, memberKeys, members } = schema;

/**
 * Every members-router endpoint as every kind of caller, table-driven. Each case runs in a
 * fresh agent ("world") so an allowed change in one case cannot colour another, and every
 * refused case must leave the agent's members, keys, invites and connections as they were.
 */

type Persona = 'anonymous' | 'outsider' | 'rejected' | 'pending' | 'approved' | 'other' | 'owner';
const PERSONAS: Persona[] = ['anonymous', 'outsider', 'rejected', 'pending', 'approved', 'other', 'owner'];
const EMAIL: Record<Exclude<Persona, 'anonymous'>, string> = {
  outsider: 'outsider@example.com',
  rejected: 'rejected@example.com',
  pending: 'pending@example.com',
  approved: 'approved@example.com',
  other: 'other@example.com',
  owner: 'owner@example.com',
};

interface World {
  agentId: string;
  /** Member ids by persona (none for anonymous and outsider), plus `target`: a pending member for owner actions. */
  memberIds: Partial<Record<Persona | 'target', string>>;
  /** An unused invite for the persona's own address where one can exist, else one for a newcomer. */
  joinTokens: Record<Persona, string>;
  /** An open invite to an address nobody uses: the subject of the invite routes. */
  inviteId: string;
}

interface Row {
  name: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: (w: World, as: Persona) => string;
  payload?: (w: World, as: Persona) => Record<string, unknown>;
  expect: Record<Persona, number>;
}

const on = (w: World) => `/api/agents/${w.agentId}`;
/** The approved member's record: the subject of self-only and self-or-owner rows. */
const approvedMember = (w: World) => `${on(w)}/members/${w.memberIds.approved}`;
const targetMember = (w: World) => `${on(w)}/members/${w.memberIds.target}`;
/** The caller's own record where they have one (the outsider has none: they address the approved member's). */
const ownMember = (w: World, as: Persona) => `${on(w)}/members/${w.memberIds[as] ?? w.memberIds.approved}`;

const OWNER_ONLY = { anonymous: 401, outsider: 404, rejected: 404, pending: 403, approved: 403, other: 403 } as const;

const rows: Row[] = [
  {
    name: 'POST /invite', method: 'POST', url: (w) => `${on(w)}/invite`, payload: () => ({ email: 'newcomer@example.com' }),
    expect: { ...OWNER_ONLY, owner: 201 },
  },
  {
    name: 'GET /invites', method: 'GET', url: (w) => `${on(w)}/invites`,
    expect: { ...OWNER_ONLY, owner: 200 },
  },
  {
    name: 'POST /invites/:inviteId/resend', method: 'POST', url: (w) => `${on(w)}/invites/${w.inviteId}/resend`,
    expect: { ...OWNER_ONLY, owner: 200 },
  },
  {
    name: 'DELETE /invites/:inviteId', method: 'DELETE', url: (w) => `${on(w)}/invites/${w.inviteId}`,
    expect: { ...OWNER_ONLY, owner: 204 },
  },
  {
    name: 'POST /join (with an invite to the caller\'s own address)', method: 'POST', url: (w) => `${on(w)}/join`,
    payload: (w, as) => ({ token: w.joinTokens[as] }),
    // Members already in: 409. The owner cannot be invited, so presents a newcomer's invite: 403.
    expect: { anonymous: 401, outsider: 200, rejected: 200, pending: 409, approved: 409, other: 409, owner: 403 },
  },
  {
    name: 'GET /members', method: 'GET', url: (w) => `${on(w)}/members`,
    expect: { anonymous: 401, outsider: 404, rejected: 404, pending: 403, approved: 200, other: 200, owner: 200 },
  },
  {
    name: 'PUT /members/:memberId/status', method: 'PUT', url: (w) => `${targetMember(w)}/status`, payload: () => ({ status: 'approved' }),
    expect: { ...OWNER_ONLY, owner: 200 },
  },
  {
    name: 'POST /members/:memberId/reject', method: 'POST', url: (w) => `${targetMember(w)}/reject`,
    expect: { ...OWNER_ONLY, owner: 200 },
  },
  {
    name: 'DELETE /members/:memberId', method: 'DELETE', url: (w) => targetMember(w),
    expect: { ...OWNER_ONLY, owner: 204 },
  },
  {
    name: 'PUT /members/:memberId/key (the approved member\'s)', method: 'PUT', url: (w) => `${approvedMember(w)}/key`, payload: () => ({}),
    expect: { anonymous: 401, outsider: 404, rejected: 404, pending: 403, approved: 200, other: 403, owner: 403 },
  },
  {
    name: 'PUT /members/:memberId/key (the caller\'s own)', method: 'PUT', url: (w, as) => `${ownMember(w, as)}/key`, payload: () => ({}),
    // A pending member may hold a key; its /mcp calls are denied until approval (decision 005).
    expect: { anonymous: 401, outsider: 404, rejected: 404, pending: 200, approved: 200, other: 200, owner: 200 },
  },
  {
    name: 'DELETE /members/:memberId/key', method: 'DELETE', url: (w) => `${approvedMember(w)}/key`,
    expect: { anonymous: 401, outsider: 404, rejected: 404, pending: 403, approved: 204, other: 403, owner: 204 },
  },
  {
    name: 'POST /members/:memberId/key/reset-lost', method: 'POST', url: (w) => `${approvedMember(w)}/key/reset-lost`,
    expect: { anonymous: 401, outsider: 404, rejected: 404, pending: 403, approved: 200, other: 403, owner: 403 },
  },
  {
    name: 'GET /members/:memberId/connections', method: 'GET', url: (w) => `${approvedMember(w)}/connections`,
    expect: { anonymous: 401, outsider: 404, rejected: 404, pending: 403, approved: 200, other: 403, owner: 200 },
  },
];

describe('members router: who may do what', () => {
  let h: ApiHarness;
  const cookies = {} as Record<Exclude<Persona, 'anonymous'>, string>;
  /** The pending member that owner actions are aimed at. */
  const TARGET_EMAIL = 'target@example.com';
  let targetCookie: string;

  beforeAll(async () => {
    h = await createApiHarness();
    for (const [persona, email] of Object.entries(EMAIL)) cookies[persona as keyof typeof EMAIL] = await h.signIn(email);
    targetCookie = await h.signIn(TARGET_EMAIL);
  });
  afterAll(async () => { await h.close(); });

  async function call(method: Row['method'], url: string, as: Persona, payload?: Record<string, unknown>) {
    return h.request({
      method, url,
      ...(as === 'anonymous' ? {} : { cookie: cookies[as] }),
      ...(payload !== undefined ? { payload } : {}),
    });
  }

  async function inviteToken(agentId: string, email: string): Promise<string> {
    const res = await call('POST', `/api/agents/${agentId}/invite`, 'owner', { email });
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { token: string }).token;
  }

  async function join(agentId: string, as: Persona, token: string): Promise<string> {
    const res = await call('POST', `/api/agents/${agentId}/join`, as, { token });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { memberId: string }).memberId;
  }

  /** A fresh agent with an owner, two approved members, a pending one, a pending target and a rejected one; keys and a connection for the approved member. */
  async function newWorld(): Promise<World> {
    const created = await call('POST', '/api/agents', 'owner', { name: 'Security agent' });
    expect(created.statusCode).toBe(201);
    const agent = created.json() as { id: string; membership: { id: string } };
    const w: World = { agentId: agent.id, memberIds: { owner: agent.membership.id }, joinTokens: {} as Record<Persona, string>, inviteId: '' };
    for (const persona of ['approved', 'other', 'pending'] as const) {
      const used = await inviteToken(w.agentId, EMAIL[persona]);
      w.joinTokens[persona] = await inviteToken(w.agentId, EMAIL[persona]); // a spare, still unused
      w.memberIds[persona] = await join(w.agentId, persona, used);
    }
    for (const persona of ['approved', 'other'] as const) {
      expect((await call('PUT', `${on(w)}/members/${w.memberIds[persona]}/status`, 'owner', { status: 'approved' })).statusCode).toBe(200);
    }
    const targetToken = await inviteToken(w.agentId, TARGET_EMAIL);
    const joinedTarget = await h.request({ method: 'POST', url: `${on(w)}/join`, cookie: targetCookie, payload: { token: targetToken } });
    w.memberIds.target = (joinedTarget.json() as { memberId: string }).memberId;

    w.memberIds.rejected = await join(w.agentId, 'rejected', await inviteToken(w.agentId, EMAIL.rejected));
    expect((await call('POST', `${on(w)}/members/${w.memberIds.rejected}/reject`, 'owner')).statusCode).toBe(200);
    w.joinTokens.rejected = await inviteToken(w.agentId, EMAIL.rejected); // sent after the rejection
    w.joinTokens.outsider = await inviteToken(w.agentId, EMAIL.outsider);
    w.joinTokens.owner = await inviteToken(w.agentId, 'newcomer@example.com');
    w.joinTokens.anonymous = w.joinTokens.owner;
    await inviteToken(w.agentId, 'invitee@example.com');
    w.inviteId = (await h.db.select({ id: invites.id }).from(invites).where(and(eq(invites.agentId, w.agentId), eq(invites.email, 'invitee@example.com'))))[0]!.id;

    expect((await call('PUT', `${approvedMember(w)}/key`, 'approved', {})).statusCode).toBe(200);
    await h.db.insert(connections).values({ memberId: w.memberIds.approved!, service: 'github', identityInfo: { login: 'approved' }, sealedTokens: 'sealed' });
    return w;
  }

  async function snapshot(agentId: string) {
    const memberRows = await h.db.select().from(members).where(eq(members.agentId, agentId)).orderBy(members.id);
    const ids = memberRows.map((m) => m.id);
    return {
      memberRows,
      keys: await h.db.select().from(memberKeys).where(inArray(memberKeys.memberId, ids)).orderBy(memberKeys.id),
      invites: await h.db.select().from(invites).where(eq(invites.agentId, agentId)).orderBy(invites.id),
      connections: await h.db.select().from(connections).where(inArray(connections.memberId, ids)).orderBy(connections.id),
    };
  }

  const cases = rows.flatMap((row) => PERSONAS.map((as) => [row.name, as, row.expect[as], row] as const));

  it.each(cases)('%s as %s → %i', async (_name, as, status, row) => {
    const w = await newWorld();
    const before = await snapshot(w.agentId);
    const events = h.events.length;
    const res = await call(row.method, row.url(w, as), as, row.payload?.(w, as));
    expect(res.statusCode, res.body).toBe(status);
    if (status >= 400) {
      const code = { 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found', 409: 'conflict' }[status];
      expect(res.json()).toMatchObject({ error: { code } });
      expect(await snapshot(w.agentId)).toEqual(before);
      expect(h.events.slice(events)).toEqual([]);
    }
    // Whatever the answer, no key digest, vault or sealed token ever leaves.
    for (const m of before.memberRows) {
      if (m.vaultWrappedPrivateKey) expect(res.body).not.toContain(m.vaultWrappedPrivateKey);
    }
    for (const k of before.keys) expect(res.body).not.toContain(k.keyHash);
    expect(res.body).not.toContain('"sealedTokens"');
    // Nor an invite token, except to the owner who just created or resent it.
    if (!/invite$|resend$/.test(row.url(w, as))) for (const token of Object.values(w.joinTokens)) expect(res.body).not.toContain(token);
  });

  describe('member records: owners see all; members see their own in full and only name, role and status of others (decision 028)', () => {
    type Subject = 'owner' | 'approved' | 'other' | 'pending' | 'target' | 'rejected';
    const SUBJECTS: Subject[] = ['owner', 'approved', 'other', 'pending', 'target', 'rejected'];
    const FULL = ['id', 'userId', 'email', 'role', 'status', 'createdAt', 'approvedAt', 'key', 'connections'];
    const SUMMARY = ['id', 'email', 'role', 'status'];
    type Seen = 'full' | 'summary' | 'absent';
    const sees = (viewer: 'owner' | 'approved' | 'other', subject: Subject): Seen => {
      if (viewer === 'owner' || viewer === subject) return 'full';
      return subject === 'rejected' ? 'absent' : 'summary';
    };
    const table = (['owner', 'approved', 'other'] as const).flatMap((viewer) => SUBJECTS.map((subject) => [viewer, subject, sees(viewer, subject)] as const));

    let w: World;
    const listed = new Map<string, Array<Record<string, unknown>>>();
    beforeAll(async () => {
      w = await newWorld();
      for (const viewer of ['owner', 'approved', 'other'] as const) {
        const res = await call('GET', `${on(w)}/members`, viewer);
        expect(res.statusCode, res.body).toBe(200);
        listed.set(viewer, (res.json() as { members: Array<Record<string, unknown>> }).members);
      }
    });

    it.each(table)('GET /members as %s shows %s: %s', (viewer, subject, seen) => {
      const record = listed.get(viewer)!.find((m) => m.id === w.memberIds[subject]);
      if (seen === 'absent') return expect(record).toBeUndefined();
      expect(Object.keys(record!).sort()).toEqual([...(seen === 'full' ? FULL : SUMMARY)].sort());
    });

    it('never shows another member\'s connection identity or key to a member, on any route', async () => {
      const [key] = await h.db.select().from(memberKeys).where(eq(memberKeys.memberId, w.memberIds.approved!));
      const otherViews = [
        `${on(w)}/members`, `${on(w)}`, '/api/agents', `${on(w)}/onboarding`, `${approvedMember(w)}/connections`,
      ];
      for (const url of otherViews) {
        const res = await call('GET', url, 'other');
        expect(res.body, url).not.toContain('"login":"approved"');
        expect(res.body, url).not.toContain(`"displaySuffix":"${key!.displaySuffix}"`);
      }
      // The member themself and the owner do see it.
      for (const viewer of ['approved', 'owner'] as const) {
        const res = await call('GET', `${on(w)}/members`, viewer);
        expect(res.body).toContain('"login":"approved"');
        expect(res.body).toContain(`"displaySuffix":"${key!.displaySuffix}"`);
      }
    });
  });

  it('answers 404 to an owner addressing a member of another agent, for every member route', async () => {
    const mine = await newWorld();
    const theirs = await newWorld();
    const before = await snapshot(theirs.agentId);
    const foreign = `${on(mine)}/members/${theirs.memberIds.approved}`;
    const attempts: Array<[Row['method'], string, Record<string, unknown>?]> = [
      ['PUT', `${foreign}/status`, { status: 'approved' }],
      ['POST', `${foreign}/reject`],
      ['DELETE', foreign],
      ['DELETE', `${foreign}/key`],
      ['GET', `${foreign}/connections`],
    ];
    for (const [method, url, payload] of attempts) {
      const res = await call(method, url, 'owner', payload);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
    }
    // Self-only routes are decided by the caller's own membership: 403, telling nothing.
    expect((await call('PUT', `${foreign}/key`, 'owner', {})).statusCode).toBe(403);
    expect((await call('POST', `${foreign}/key/reset-lost`, 'owner')).statusCode).toBe(403);
    expect(await snapshot(theirs.agentId)).toEqual(before);
  });

  it('answers the same 404 for an agent that does not exist as for one the caller is outside of', async () => {
    const missing = await call('GET', '/api/agents/00000000-0000-4000-8000-000000000000/members', 'outsider');
    const w = await newWorld();
    const outside = await call('GET', `${on(w)}/members`, 'outsider');
    expect(missing.statusCode).toBe(404);
    expect((outside.json() as { error: { message: string } }).error.message).toBe((missing.json() as { error: { message: string } }).error.message);
  });
});
