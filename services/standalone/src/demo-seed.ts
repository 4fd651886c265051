import { eq } from 'drizzle-orm';
import {
  createMemberVault, digestKey, displaySuffixOf, generateMemberKey, getConnector, sealToMember, schema, type Database,
} from '@portcullis/core';

export const DEMO_OWNER_EMAIL = 'demo@portcullis.local';
export const DEMO_AGENT_NAME = 'Demo agent';
/** Enabled on the demo agent; the demo member connects the first three, so Stripe shows the filter at work. */
export const DEMO_ENABLED_SERVICES = ['github', 'slack', 'linear', 'stripe'];
export const DEMO_CONNECTED_SERVICES = ['github', 'slack', 'linear'];
export const DEMO_POLICY_KEY = 'demo-block-destructive-github';
export const DEMO_DENY_MESSAGE = 'Destructive GitHub operations are blocked for this agent. Ask an owner if you really need one.';

export interface DemoSeed {
  agentId: string;
  memberId: string;
  memberKey: string;
  ownerEmail: string;
  policyId: string;
}

/** Issues an upstream access token for a member's identity on one connector. */
export type IssueUpstreamToken = (service: string, identity: { login: string; name: string }) => Promise<string> | string;

/** An OAuth app registered with the provider, as an owner does on its developer site. */
export type RegisterOAuthApp = (service: string) => Promise<{ clientId: string; clientSecret: string }> | { clientId: string; clientSecret: string };

/**
 * Seeds the demo: an owner, an agent with four connectors enabled, the owner as an approved
 * member holding a key and connected (through the sandbox) to GitHub, Slack and Linear, the
 * owner's OAuth-app credentials for the enabled "your OAuth app" connectors (so anyone invited
 * can connect them), and one forbid policy on GitHub's destructive tools. Answers undefined
 * when already seeded.
 */
export async function seedDemo(db: Database, deps: {
  issueToken: IssueUpstreamToken;
  cedarOf: (record: PolicyRecordForCedar) => string;
  registerApp: RegisterOAuthApp;
  /** Seals a client secret as the credentials service stores it. */
  sealClientSecret: (secret: string) => string;
}, ownerEmail = DEMO_OWNER_EMAIL): Promise<DemoSeed | undefined> {
  const [existing] = await db.select().from(schema.users).where(eq(schema.users.email, ownerEmail));
  if (existing) return undefined;

  const tokens = await Promise.all(DEMO_CONNECTED_SERVICES.map((service) => deps.issueToken(service, { login: 'demo-user', name: 'Demo User' })));
  const ownApps = DEMO_ENABLED_SERVICES.filter((service) => getConnector(service)!.oauth === 'own_app');
  const apps = await Promise.all(ownApps.map(async (service) => ({ service, ...(await deps.registerApp(service)) })));

  return db.transaction(async (tx) => {
    const [owner] = await tx.insert(schema.users).values({ email: ownerEmail, displayName: 'Demo owner' }).returning();
    const [agent] = await tx.insert(schema.agents).values({
      name: DEMO_AGENT_NAME, tags: ['demo'], type: 'standard', allowedServices: DEMO_ENABLED_SERVICES, createdBy: owner!.id, policyVersion: 1,
    }).returning();
    const [member] = await tx.insert(schema.members).values({
      agentId: agent!.id, userId: owner!.id, email: ownerEmail, role: 'owner', status: 'approved', approvedAt: new Date(),
    }).returning();
    const memberKey = generateMemberKey();
    const vault = createMemberVault(member!.id, memberKey);
    await tx.update(schema.members).set({ vaultPublicKey: vault.publicKey, vaultWrappedPrivateKey: vault.wrappedPrivateKey }).where(eq(schema.members.id, member!.id));
    await tx.insert(schema.memberKeys).values({ memberId: member!.id, keyHash: digestKey(memberKey), displaySuffix: displaySuffixOf(memberKey) });
    await tx.insert(schema.connectorCredentials).values(apps.map((app) => ({
      agentId: agent!.id, service: app.service, clientId: app.clientId, clientSecretSealed: deps.sealClientSecret(app.clientSecret),
    })));
    await tx.insert(schema.connections).values(DEMO_CONNECTED_SERVICES.map((service, i) => ({
      memberId: member!.id,
      service,
      identityInfo: { login: 'demo-user', name: 'Demo User' },
      sealedTokens: sealToMember(vault.publicKey, JSON.stringify({ accessToken: tokens[i] })),
    })));

    const record: PolicyRecordForCedar = {
      policyKey: DEMO_POLICY_KEY,
      name: 'Block destructive GitHub tools',
      service: 'github',
      effect: 'forbid',
      tools: [],
      tiers: ['destructive'],
      principal: { type: 'all_members' },
      denyMessage: DEMO_DENY_MESSAGE,
      enabled: true,
    };
    const [policy] = await tx.insert(schema.policies).values({ agentId: agent!.id, ...record, conditions: {} }).returning();
    const [version] = await tx.insert(schema.policyVersions).values({
      agentId: agent!.id, policyId: policy!.id, version: 1, change: 'create', snapshot: { ...record, id: policy!.id }, cedar: deps.cedarOf(record), authorUserId: owner!.id,
    }).returning();
    await tx.update(schema.policies).set({ currentVersionId: version!.id }).where(eq(schema.policies.id, policy!.id));

    return { agentId: agent!.id, memberId: member!.id, memberKey, ownerEmail, policyId: policy!.id };
  });
}

export interface PolicyRecordForCedar {
  policyKey: string;
  name: string;
  service: string;
  effect: 'forbid' | 'permit';
  tools: string[];
  tiers: string[];
  principal: { type: 'all_members' } | { type: 'members'; ids: string[] };
  denyMessage: string | null;
  enabled: boolean;
}
