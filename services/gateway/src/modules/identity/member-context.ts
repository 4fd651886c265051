import type { KeyObject } from 'node:crypto';

/** Everything a `/mcp` request needs to know about the caller, resolved from its member key. */
export interface MemberContext {
  keyId: string;
  memberId: string;
  memberEmail: string;
  memberRole: 'owner' | 'member';
  memberStatus: 'pending' | 'approved' | 'rejected';
  agentId: string;
  agentName: string;
  agentStatus: 'active' | 'disabled';
  /** A trusted agent hides policy identities from members who do not own it (decision 022), in tool results too. */
  agentType: 'standard' | 'trusted';
  agentPolicyVersion: number;
  allowedServices: string[];
  connections: MemberConnection[];
  /** The member's vault key, unwrapped with the presented member key; absent when it cannot be. */
  vaultPrivateKey: KeyObject | undefined;
  /** Set when the caller presented an OAuth access token instead of the member key (decision 053). */
  oauth?: { clientId: string; grantId: string };
}

export interface MemberConnection {
  id: string;
  service: string;
  identityInfo: Record<string, unknown>;
  sealedTokens: string;
  status: 'active' | 'needs_reauth';
  updatedAt: Date;
}
