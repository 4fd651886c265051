import { ApiError, connectors, getConnector, type Bus, type Database, type OAuthKind } from '@portcullis/core';
import { loadAgentAccess, requireOwner, type AgentAccess } from './agent-access.ts';
import { createAgentRepo, type AgentFacts, type AgentListQuery, type AgentWithMembership } from './agent-repo.ts';

/** An agent as the REST API shows it, in a list and as a detail: exactly the spec's list fields. */
export interface AgentView {
  id: string;
  name: string;
  tags: string[];
  type: 'standard' | 'trusted';
  status: 'active' | 'disabled';
  allowedServices: string[];
  /** What a call no policy decides gets (`allow`: the spec's "no forbid policy matched"). */
  defaultDecision: 'allow' | 'deny';
  /** The caller's own current key; both fields null when the caller has none. */
  key: { displaySuffix: string | null; lastUsedAt: string | null };
  /** The caller's own membership, and how many approved members the agent has. */
  membership: { id: string; role: 'owner' | 'member'; status: 'pending' | 'approved' | 'rejected'; memberCount: number };
  /** The caller's own connections: metadata only, never tokens. */
  connections: Array<{ service: string; identityInfo: Record<string, unknown> }>;
  /** Policies of the agent, enabled or not, for an approved owner; 0 for anyone else (they cannot read policies, decision 012). */
  policyCount: number;
  createdAt: string;
}

export type NextStep = 'await_approval' | 'generate_key' | `connect:${string}` | 'ready';

/** What a member still has to do before their agent can call tools. */
export interface OnboardingView {
  agentId: string;
  member: { id: string; status: 'pending' | 'approved' | 'rejected'; role: 'owner' | 'member' };
  key: { state: 'none' | 'active'; displaySuffix?: string; lastUsedAt?: string };
  connectors: Array<{ service: string; label: string; oauth: OAuthKind; connected: boolean; status?: 'active' | 'needs_reauth'; identityInfo?: Record<string, unknown> }>;
  nextStep: NextStep;
}

export interface SignedIn { id: string; email: string }

function toView({ agent, membership }: AgentWithMembership, facts: AgentFacts): AgentView {
  const key = facts.currentKey.get(membership.id);
  return {
    id: agent.id,
    name: agent.name,
    tags: agent.tags,
    type: agent.type,
    status: agent.status,
    allowedServices: agent.allowedServices,
    defaultDecision: agent.defaultDecision,
    key: { displaySuffix: key?.displaySuffix ?? null, lastUsedAt: key?.lastUsedAt?.toISOString() ?? null },
    membership: { id: membership.id, role: membership.role, status: membership.status, memberCount: facts.memberCount.get(agent.id) ?? 0 },
    connections: (facts.connections.get(membership.id) ?? []).map((c) => ({ service: c.service, identityInfo: c.identityInfo })),
    // Policies are the owners' (decision 012): a count of what the caller cannot open is 0,
    // as GET /api/dashboard/stats counts them (decision 071).
    policyCount: membership.role === 'owner' && membership.status === 'approved' ? facts.policyCount.get(agent.id) ?? 0 : 0,
    createdAt: agent.createdAt.toISOString(),
  };
}

/** Tags as stored: trimmed by validation, empty ones refused there, duplicates dropped here (first wins). */
function normaliseTags(tags: string[]): string[] {
  return [...new Set(tags)];
}

/**
 * Connector keys as stored: each must be in the catalog (else 400 naming it), duplicates are
 * dropped, and the result is in catalog order so two equal sets always look the same.
 */
export function normaliseServices(services: string[]): string[] {
  const wanted = new Set<string>();
  for (const key of services) {
    if (!getConnector(key)) throw new ApiError('invalid_request', `Unknown connector "${key}" in services.`, { field: 'services', value: key });
    wanted.add(key);
  }
  return connectors.filter((c) => wanted.has(c.key)).map((c) => c.key);
}

/**
 * Agents: listing, creation, owner changes and member onboarding. Access follows
 * `agent-access.ts`: outsiders (and rejected members) get 404, non-owners 403 on owner routes.
 * Changes that a `/mcp` request may have cached (status, services, name, deletion) are
 * announced with `agent.changed` so every replica drops its cached member keys at once.
 */
export function createAgentService(deps: { db: Database; bus: Pick<Bus, 'publishChange'> }) {
  const repo = createAgentRepo(deps.db);

  async function viewOf(row: AgentWithMembership): Promise<AgentView> {
    return toView(row, await repo.factsOf([row]));
  }

  async function ownerAccess(agentId: string, user: SignedIn): Promise<AgentAccess> {
    const access = await loadAgentAccess(deps.db, agentId, user.id);
    requireOwner(access);
    return access;
  }

  async function changeAsOwner(agentId: string, user: SignedIn, change: Parameters<typeof repo.update>[1]): Promise<AgentView> {
    const access = await ownerAccess(agentId, user);
    // A new default decision changes what the policy set decides: like a policy edit, it
    // bumps policy_version (so the PDP refuses a stale cached set) and says policy.changed.
    const decisionChanged = change.defaultDecision !== undefined && change.defaultDecision !== access.agent.defaultDecision;
    const agent = await repo.update(agentId, change, { bumpPolicyVersion: decisionChanged });
    if (!agent) throw new ApiError('not_found', 'Agent not found.');
    deps.bus.publishChange({ kind: 'agent.changed', agentId });
    if (decisionChanged) deps.bus.publishChange({ kind: 'policy.changed', agentId, policyVersion: agent.policyVersion });
    return viewOf({ agent, membership: access.membership });
  }

  return {
    async list(user: SignedIn, query: AgentListQuery): Promise<{ agents: AgentView[]; total: number }> {
      const { rows, total } = await repo.listVisible(user.id, query);
      const facts = await repo.factsOf(rows);
      return { agents: rows.map((r) => toView(r, facts)), total };
    },

    async create(user: SignedIn, input: { name: string; tags?: string[] | undefined; type?: 'standard' | 'trusted' | undefined }): Promise<AgentView> {
      const row = await repo.createWithOwner({ name: input.name, tags: normaliseTags(input.tags ?? []), type: input.type ?? 'standard', userId: user.id, email: user.email });
      return viewOf(row);
    },

    async get(agentId: string, user: SignedIn): Promise<AgentView> {
      const access = await loadAgentAccess(deps.db, agentId, user.id);
      return viewOf(access);
    },

    async update(agentId: string, user: SignedIn, input: { name?: string | undefined; tags?: string[] | undefined; defaultDecision?: 'allow' | 'deny' | undefined }): Promise<AgentView> {
      return changeAsOwner(agentId, user, {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.tags !== undefined ? { tags: normaliseTags(input.tags) } : {}),
        ...(input.defaultDecision !== undefined ? { defaultDecision: input.defaultDecision } : {}),
      });
    },

    async setStatus(agentId: string, user: SignedIn, status: 'active' | 'disabled'): Promise<AgentView> {
      return changeAsOwner(agentId, user, { status });
    },

    async setServices(agentId: string, user: SignedIn, services: string[]): Promise<AgentView> {
      const allowedServices = normaliseServices(services);
      return changeAsOwner(agentId, user, { allowedServices });
    },

    async remove(agentId: string, user: SignedIn): Promise<void> {
      await ownerAccess(agentId, user);
      if (!(await repo.delete(agentId))) throw new ApiError('not_found', 'Agent not found.');
      deps.bus.publishChange({ kind: 'agent.changed', agentId });
    },

    async onboarding(agentId: string, user: SignedIn): Promise<OnboardingView> {
      const access = await loadAgentAccess(deps.db, agentId, user.id);
      const facts = await repo.factsOf([access]);
      const { membership, agent } = access;
      const key = facts.currentKey.get(membership.id);
      const connected = new Map((facts.connections.get(membership.id) ?? []).map((c) => [c.service, c]));
      const list: OnboardingView['connectors'] = [];
      for (const service of agent.allowedServices) {
        const connector = getConnector(service);
        if (!connector) continue; // a key the catalog no longer has: nothing to connect to
        const connection = connected.get(service);
        list.push({
          service,
          label: connector.label,
          oauth: connector.oauth,
          connected: connection?.status === 'active',
          ...(connection ? { status: connection.status, identityInfo: connection.identityInfo } : {}),
        });
      }
      const firstUnconnected = list.find((c) => !c.connected);
      const nextStep: NextStep = membership.status !== 'approved' ? 'await_approval'
        : !key ? 'generate_key'
          : firstUnconnected ? `connect:${firstUnconnected.service}`
            : 'ready';
      return {
        agentId: agent.id,
        member: { id: membership.id, status: membership.status, role: membership.role },
        key: key
          ? { state: 'active', displaySuffix: key.displaySuffix, ...(key.lastUsedAt ? { lastUsedAt: key.lastUsedAt.toISOString() } : {}) }
          : { state: 'none' },
        connectors: list,
        nextStep,
      };
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
