import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import type { ApiHarness } from './api-harness.ts';

/** The callers every route's security test runs as. */
export type Actor = 'anonymous' | 'outsider' | 'rejected' | 'pending' | 'member' | 'owner';
export const ACTORS: Actor[] = ['anonymous', 'outsider', 'rejected', 'pending', 'member', 'owner'];

/**
 * What an agent-scoped route answers each actor: anonymous 401 (before anything is parsed),
 * outsiders and rejected members a 404 like a missing agent's, and members 403 on owner-only
 * routes (`any-member`: every member not rejected, pending included); whoever may call it gets
 * `success`. A `signed-in` route (not agent-scoped) answers every signed-in user.
 */
export function expectedStatus(actor: Actor, access: 'owner' | 'any-member' | 'signed-in', success: number): number {
  if (actor !== 'anonymous' && access === 'signed-in') return success;
  switch (actor) {
    case 'anonymous': return 401;
    case 'outsider':
    case 'rejected': return 404;
    case 'pending':
    case 'member': return access === 'owner' ? 403 : success;
    case 'owner': return success;
  }
}

export interface RoleActors {
  email: Record<Exclude<Actor, 'anonymous'>, string>;
  /** Session cookies of every signed-in actor (anonymous has none). */
  cookieOf: Partial<Record<Actor, string>>;
  /** A fresh agent created by `owner` through the API, with `member` approved, `pending` and `rejected` rows. */
  agentWithMembers(payload?: Record<string, unknown>): Promise<string>;
}

/** Signs in the five actors (e-mails `<prefix>-<actor>@example.com`) through the real sign-in flow. */
export async function signInRoleActors(h: ApiHarness, prefix: string): Promise<RoleActors> {
  const email = {
    owner: `${prefix}-owner@example.com`,
    member: `${prefix}-member@example.com`,
    pending: `${prefix}-pending@example.com`,
    rejected: `${prefix}-rejected@example.com`,
    outsider: `${prefix}-outsider@example.com`,
  };
  const cookieOf: Partial<Record<Actor, string>> = {};
  for (const [actor, address] of Object.entries(email)) cookieOf[actor as Actor] = await h.signIn(address);

  const userIdOf = async (address: string) =>
    (await h.db.select({ id: schema.users.id }).from(schema.users).where(eq(schema.users.email, address)))[0]!.id;

  return {
    email,
    cookieOf,
    async agentWithMembers(payload = { name: 'Guarded' }) {
      const res = await h.request({ method: 'POST', url: '/api/agents', payload, cookie: cookieOf.owner! });
      if (res.statusCode !== 201) throw new Error(`creating an agent answered ${res.statusCode}: ${res.body}`);
      const agentId = (res.json() as { id: string }).id;
      for (const actor of ['member', 'pending', 'rejected'] as const) {
        const status = actor === 'member' ? 'approved' : actor;
        await h.db.insert(schema.members).values({ agentId, userId: await userIdOf(email[actor]), email: email[actor], role: 'member', status });
      }
      return agentId;
    },
  };
}

/** An error body without its request id, to compare two answers for equality. */
export const withoutRequestId = (body: { error?: Record<string, unknown> }) => ({ error: { ...body.error, requestId: undefined } });
