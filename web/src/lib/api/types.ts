/** Shapes of the gateway's `/api` answers the dashboard reads (see /api/openapi.json). */
export interface User { id: string; email: string }
export interface AuthStatus { authenticated: boolean; user?: User; mfa: { enabled: boolean; satisfied: boolean } }

export interface Agent {
  id: string;
  name: string;
  tags: string[];
  type: string;
  status: 'active' | 'disabled';
  allowedServices: string[];
  defaultDecision?: 'allow' | 'deny';
  key: { displaySuffix: string | null; lastUsedAt: string | null } | null;
  membership: { id: string; role: 'owner' | 'member'; status: 'pending' | 'approved' | 'rejected'; memberCount: number };
  connections: Array<{ service: string; identityInfo: Record<string, unknown> }>;
  policyCount: number;
  createdAt: string;
}

export interface ConnectorMeta { key: string; label: string; description?: string; oauth: string; webhookSecret: boolean; toolCount?: number }

export interface AuditEntry {
  id: string; timestamp: string; agentId: string; agentName: string; memberId: string; memberName: string; user: string;
  memberKeyId: string; sessionId?: string; service: string; tool: string; action: string; resource: string; callerIp: string;
  toolArgs: Record<string, unknown>; decision: 'ALLOW' | 'DENY'; reason: string; matchedPolicyIds: string[];
  matchedPolicyNames: string[]; policyVersionIds: string[]; durationMs: number; principal: string;
}
