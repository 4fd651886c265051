import {
  createMemberVault, digestKey, displaySuffixOf, generateMemberKey, sealToMember, schema, type Database,
} from '@portcullis/core';

/** Asks a running sandbox for an upstream token, as a seed in another process must. */
export function sandboxTokenIssuer(sandboxUrl: string) {
  return async (service: string, identity: { login: string; name: string }): Promise<string> => {
    const res = await fetch(`${sandboxUrl}/_sandbox/${service}/tokens`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(identity),
    });
    if (!res.ok) throw new Error(`sandbox token endpoint answered ${res.status}`);
    return ((await res.json()) as { access_token: string }).access_token;
  };
}

/** Registers an owner's OAuth app with a running sandbox provider, as its developer site would. */
export function sandboxAppRegistrar(sandboxUrl: string, redirectUri: string) {
  return async (service: string): Promise<{ clientId: string; clientSecret: string }> => {
    const res = await fetch(`${sandboxUrl}/_sandbox/${service}/apps`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: [redirectUri], name: 'Portcullis tests' }),
    });
    if (res.status !== 201) throw new Error(`sandbox apps endpoint answered ${res.status}`);
    const app = (await res.json()) as { client_id: string; client_secret: string };
    return { clientId: app.client_id, clientSecret: app.client_secret };
  };
}

/** Adds a member (with a key, a vault and connections) to an agent, as later issues' API will. */
export async function addMember(db: Database, o: {
  agentId: string; email: string; status: 'pending' | 'approved'; connect: Record<string, string>;
}): Promise<{ memberId: string; memberKey: string; keyId: string }> {
  const [user] = await db.insert(schema.users).values({ email: o.email }).returning();
  const [member] = await db.insert(schema.members).values({ agentId: o.agentId, userId: user!.id, email: o.email, role: 'member', status: o.status }).returning();
  const memberKey = generateMemberKey();
  const vault = createMemberVault(member!.id, memberKey);
  const { eq } = await import('drizzle-orm');
  await db.update(schema.members).set({ vaultPublicKey: vault.publicKey, vaultWrappedPrivateKey: vault.wrappedPrivateKey }).where(eq(schema.members.id, member!.id));
  const [key] = await db.insert(schema.memberKeys).values({ memberId: member!.id, keyHash: digestKey(memberKey), displaySuffix: displaySuffixOf(memberKey) }).returning();
  for (const [service, token] of Object.entries(o.connect)) {
    await db.insert(schema.connections).values({
      memberId: member!.id, service, identityInfo: { login: o.email.split('@')[0] }, sealedTokens: sealToMember(vault.publicKey, JSON.stringify({ accessToken: token })),
    });
  }
  return { memberId: member!.id, memberKey, keyId: key!.id };
}
