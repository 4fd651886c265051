/**
 * Names for the shapes of the gateway's `/api` answers the dashboard reads. Each is taken from
 * the generated `openapi.d.ts` (decision 040: `npm run api:types` regenerates it from the
 * routes' schemas), so a route that changes shape fails the dashboard's type-check.
 */
import type { Answer, Body, Query } from './client.ts';

type Item<T> = T extends ReadonlyArray<infer I> ? I : never;

/* Sign-in and account. */
export type AuthStatus = Answer<'/api/auth/status'>;
export type User = NonNullable<AuthStatus['user']>;
export type VerifyAnswer = Answer<'/api/auth/verify', 'post'>;
/** POST /api/auth/mfa/setup. */
export type MfaSetup = Answer<'/api/auth/mfa/setup', 'post'>;
/** GET /api/users/me/sessions: one of the signed-in user's dashboard sessions. */
export type DashboardSession = Item<Answer<'/api/users/me/sessions'>['sessions']>;

/* Agents, members, keys and connections. */
export type Agent = Answer<'/api/agents/{id}'>;
export type AgentList = Answer<'/api/agents'>;
export type AgentSortBy = NonNullable<Query<'/api/agents'>['sortBy']>;
export type AgentCreate = Body<'/api/agents', 'post'>;

/**
 * A member in GET …/members. Owners see every record in full; other members see their own in
 * full and only `id`, `email`, `role` and `status` of the others (decision 028).
 */
export type Member = Item<Answer<'/api/agents/{id}/members'>['members']>;
export type MemberList = Answer<'/api/agents/{id}/members'>;
export type MemberStatus = Member['status'];
export type Invite = Answer<'/api/agents/{id}/invite', 'post'>;
export type JoinResult = Answer<'/api/agents/{id}/join', 'post'>;
/** PUT …/members/:memberId/key: the only answer that ever carries the key itself. */
export type IssuedKey = Answer<'/api/agents/{id}/members/{memberId}/key', 'put'>;
export type ResetLostResult = Answer<'/api/agents/{id}/members/{memberId}/key/reset-lost', 'post'>;
export type ConnectionList = Answer<'/api/agents/{id}/members/{memberId}/connections'>;
export type Connection = Item<ConnectionList['connections']>;
export type ConnectionStatus = Connection['status'];
export type Onboarding = Answer<'/api/agents/{id}/onboarding'>;

/* Connectors and credentials. */
/** A connector key as routes take it in their path (the catalog's 16 keys). */
export type ConnectorKey = NonNullable<Query<'/api/tools/catalog'>['service']>;
export type ConnectorsMeta = Answer<'/api/connectors/meta'>;
export type ConnectorInfo = Item<ConnectorsMeta['connectors']>;
export type CredentialsList = Answer<'/api/agents/{id}/services/credentials'>;
/** Metadata of an agent's OAuth-app credentials; secrets are never returned. */
export type CredentialsInfo = Item<CredentialsList['credentials']>;
export type CredentialsSet = Answer<'/api/agents/{id}/services/{service}/credentials', 'put'>;
export type CredentialsBody = Body<'/api/agents/{id}/services/{service}/credentials', 'put'>;

/* Policies (decision 012; conditions decision 011). */
export type PolicyList = Answer<'/api/agents/{id}/policies'>;
export type Policy = Item<PolicyList['policies']>;
/** Body of POST/PUT …/policies and the draft of preview and simulate. */
export type PolicyDraft = Body<'/api/agents/{id}/policies', 'post'>;
export type PolicyEffect = Policy['effect'];
export type PolicyTier = Item<Policy['tiers']>;
export type PolicyPrincipal = Policy['principal'];
export type PolicyConditions = NonNullable<PolicyDraft['conditions']>;
export type Weekday = Item<NonNullable<PolicyConditions['timeWindow']>['days']>;
export type ArgRule = Item<NonNullable<PolicyConditions['args']>>;
export type ArgScalar = Extract<ArgRule, { op: 'equals' }>['value'];
export type PolicyVersion = Item<Answer<'/api/agents/{id}/policies/{policyId}/versions'>['versions']>;
export type PolicyPreview = Answer<'/api/agents/{id}/policies/preview', 'post'>;
export type SimulateBody = Body<'/api/agents/{id}/policies/simulate', 'post'>;
export type SimulateResult = Answer<'/api/agents/{id}/policies/simulate', 'post'>;
export type PolicyMode = Policy['mode'];
/** GET …/policies/:policyId/shadow (decision 062). */
export type ShadowResults = Answer<'/api/agents/{id}/policies/{policyId}/shadow'>;
export type CatalogService = Item<Answer<'/api/tools/catalog'>['services']>;
export type CatalogTool = Item<CatalogService['tools'][PolicyTier]>;
export type HarvestedEntity = Item<Answer<'/api/agents/{id}/entities/{service}/{type}'>['entities']>;

/* Audit (decision 014) and the dashboard's counters. */
export type AuditPage = Answer<'/api/audit'>;
/** An audit entry; `sessionId` only where the call had an MCP session. */
export type AuditEntry = Item<AuditPage['entries']>;
/** GET /api/audit/members: a member identity seen in the caller's audit data (filter dropdowns). */
export type AuditMember = Item<Answer<'/api/audit/members'>['members']>;
export type MemberStats = Answer<'/api/dashboard/member-stats'>;

/* Tool (MCP) sessions (decision 017). */
export type ToolSessionPage = Answer<'/api/agents/{id}/sessions'>;
export type ToolSession = Item<ToolSessionPage['sessions']>;
export type SessionActivity = Answer<'/api/agents/{id}/sessions/{sessionId}/activity'>;
