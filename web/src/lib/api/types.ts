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

/** GET /api/audit: one page of entries, newest first, and how many match in all. */
export interface AuditPage { entries: AuditEntry[]; total: number }
/** GET /api/audit/members: a member identity seen in the caller's audit data (filter dropdowns). */
export interface AuditMember { memberId: string; memberName: string }

/** A tool (MCP) session of an agent (decision 017). */
export interface ToolSession {
  id: string; agentId: string; memberId: string; memberEmail: string; keyId: string;
  clientName: string; clientVersion: string; protocolVersion: string;
  status: 'active' | 'expired' | 'terminated';
  createdAt: string; lastSeenAt: string; endedAt: string | null; endReason: string | null;
}
export interface ToolSessionPage { sessions: ToolSession[]; total: number }
/** GET /api/agents/:id/sessions/:sessionId/activity. */
export interface SessionActivity {
  session: ToolSession;
  calls: number; allowed: number; denied: number; firstCallAt: string | null; lastCallAt: string | null;
  tools: Array<{ service: string; tool: string; calls: number; allowed: number; denied: number }>;
  policies: Array<{ policyId: string; policyKey: string; policyName: string; hits: number }>;
}

/** GET /api/users/me/sessions: one of the signed-in user's dashboard sessions. */
export interface DashboardSession { id: string; createdAt: string; lastSeenAt: string; expiresAt: string; ip: string | null; userAgent: string | null; current: boolean }
/** POST /api/auth/mfa/setup. */
export interface MfaSetup { secret: string; otpauthUrl: string }

/* Policies (decision 012; body shape DESIGN §3, conditions decision 011). */
export type PolicyEffect = 'forbid' | 'permit';
export type PolicyTier = 'read' | 'write' | 'destructive';
export type Weekday = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';
export type PolicyPrincipal = { type: 'all_members' } | { type: 'members'; ids: string[] };
export type ArgScalar = string | number | boolean;
export type ArgRule =
  | { path: string; op: 'equals'; value: ArgScalar }
  | { path: string; op: 'oneOf'; values: ArgScalar[] }
  | { path: string; op: 'prefix'; value: string }
  | { path: string; op: 'regex'; pattern: string };
export interface PolicyConditions {
  timeWindow?: { days: Weekday[]; start: string; end: string; timeZone: string };
  sessionLimit?: { maxCalls: number };
  resources?: { match: 'in' | 'not_in'; ids: string[] };
  args?: ArgRule[];
}
/** Body of POST/PUT …/policies and the draft of preview and simulate. */
export interface PolicyDraft {
  name: string;
  policyKey?: string;
  service: string;
  effect: PolicyEffect;
  tools?: string[];
  tiers?: PolicyTier[];
  principal: PolicyPrincipal;
  conditions?: PolicyConditions;
  denyMessage?: string | null;
  enabled?: boolean;
}
export interface Policy {
  id: string; policyKey: string; name: string; service: string; effect: PolicyEffect;
  /** Every tool the policy covers (tiers expanded); `listedTools` and `tiers` are as written. */
  tools: string[]; listedTools: string[]; tiers: PolicyTier[]; principal: PolicyPrincipal; conditions: PolicyConditions;
  denyMessage: string | null; enabled: boolean; version: number | null; currentVersionId: string | null;
  /** null when the audit service did not answer. */
  triggerCount: number | null; lastTriggered: string | null; createdAt: string; updatedAt: string;
}
export interface PolicyVersion {
  id: string; version: number; change: 'create' | 'update' | 'toggle' | 'delete' | 'restore';
  snapshot: Record<string, unknown>; cedar: string; author: { id: string; email: string } | null; createdAt: string;
}
export interface PolicyPreview { cedar: string; errors: string[]; warnings: string[] }
export interface SimulateResult {
  evaluated: number; unchanged: number; allowToDeny: number; denyToAllow: number;
  samples: Array<{ entryId: string; before: string; after: string; reason: string }>;
  skipped?: number; from?: string; to?: string;
}
export interface CatalogTool { name: string; description: string; inputSchema: { type: 'object'; properties: Record<string, { type: string }>; required?: string[] } }
export interface CatalogService { service: string; label: string; tools: Record<PolicyTier, CatalogTool[]> }
export interface HarvestedEntity { id: string; name: string; attributes: Record<string, unknown>; harvestedAt: string }

/* Agents, members, keys and connections (issue 8: the agent pages). */

export interface AgentList { agents: Agent[]; total: number }
export type AgentSortBy = 'name' | 'createdAt' | 'status';

export type MemberStatus = 'pending' | 'approved' | 'rejected';
export type ConnectionStatus = 'active' | 'needs_reauth';

/**
 * A member in GET …/members. Owners see every record in full; other members see their own in
 * full and only `id`, `email`, `role` and `status` of the others (decision 028): the other
 * fields are then absent.
 */
export interface Member {
  id: string;
  userId?: string;
  email: string;
  role: 'owner' | 'member';
  status: MemberStatus;
  createdAt?: string;
  approvedAt?: string | null;
  key?: { displaySuffix: string; lastUsedAt: string | null } | null;
  connections?: Array<{ service: string; identityInfo: Record<string, unknown>; status: ConnectionStatus }>;
}
export interface MemberList { members: Member[]; total: number }

export interface Invite { token: string; url: string; expiresAt: string }
export interface JoinResult { memberId: string; status: 'pending' }
/** PUT …/members/:memberId/key: the only answer that ever carries the key itself. */
export interface IssuedKey { key: string; keyId: string; displaySuffix: string }
export interface ResetLostResult { cleared: string[] }

export interface Connection { service: string; identityInfo: Record<string, unknown>; status: ConnectionStatus; createdAt: string }
export interface ConnectionList { connections: Connection[] }

export interface Onboarding {
  agentId: string;
  member: { id: string; status: MemberStatus; role: 'owner' | 'member' };
  key: { state: 'none' | 'active'; displaySuffix?: string; lastUsedAt?: string };
  connectors: Array<{ service: string; label: string; oauth: 'own_app' | 'managed'; connected: boolean; status?: ConnectionStatus; identityInfo?: Record<string, unknown> }>;
  /** `await_approval` | `generate_key` | `connect:<service>` | `ready` */
  nextStep: string;
}

/** GET /api/connectors/meta, as the gateway answers it. */
export interface ConnectorInfo {
  key: string;
  label: string;
  oauth: 'own_app' | 'managed';
  /** Whether PUT …/credentials accepts `webhookSecret` for this connector. */
  webhookSecret: boolean;
  entityTypes: string[];
  toolCount: number;
  tierCounts: { read: number; write: number; destructive: number };
}
export interface ConnectorsMeta { connectors: ConnectorInfo[] }

/** Metadata of an agent's OAuth-app credentials; secrets are never returned. */
/** `configured`: the OAuth app is set (`clientId` is null when only a webhook secret is stored). */
export interface CredentialsInfo { service: string; configured: boolean; hasWebhookSecret: boolean; clientId: string | null; updatedAt: string }
export interface CredentialsList { credentials: CredentialsInfo[] }
export interface CredentialsSet { service: string; configured: boolean; hasWebhookSecret: boolean }

export interface AuditPage { entries: AuditEntry[]; total: number }
export interface MemberStats { members: Array<{ memberId: string; memberName: string; calls: number; allowed: number; denied: number; lastCallAt: string }> }
