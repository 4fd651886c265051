import { eq } from 'drizzle-orm';
import { schema, sealToMember } from '@portcullis/core';
import { expect } from 'vitest';
import { apiClient, signInThroughOutbox, type ApiClient } from './api-client.ts';
import { sandboxTokenIssuer } from './fixtures.ts';
import type { SplitTopology } from './split-topology.ts';

/**
 * An owner signed in on the topology's first gateway with a new agent that has GitHub enabled,
 * the owner's member key, and the owner's GitHub connection (a sealed sandbox token for `olive`,
 * as the OAuth flow would leave it).
 */
export async function ownerAgentWithGithub(t: SplitTopology, o: { email: string; agentName: string }): Promise<{
  owner: ApiClient; agentId: string; ownerMemberId: string; ownerKey: string;
}> {
  const owner = apiClient(t.gateways[0]!);
  await signInThroughOutbox(owner, t.outboxDir, o.email);
  const agentId = (await owner.call('POST', '/api/agents', { name: o.agentName })).body.id as string;
  expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);
  const ownerMemberId = (await owner.call('GET', `/api/agents/${agentId}`)).body.membership.id as string;
  const ownerKey = (await owner.call('PUT', `/api/agents/${agentId}/members/${ownerMemberId}/key`, {})).body.key as string;
  const [row] = await t.database.db.select().from(schema.members).where(eq(schema.members.id, ownerMemberId));
  const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'olive', name: 'Olive' });
  await t.database.db.insert(schema.connections).values({
    memberId: ownerMemberId, service: 'github', identityInfo: { login: 'olive' },
    sealedTokens: sealToMember(row!.vaultPublicKey!, JSON.stringify({ accessToken: token })),
  });
  return { owner, agentId, ownerMemberId, ownerKey };
}
