/**
 * Typed calls for the policy pages: the agent's policies (decision 012), preview and simulate
 * (decision 013), versions, and what the editor's pickers read (catalog, connectors, members,
 * harvested entities). Every call throws `ApiError` on a non-2xx answer.
 */
import { api } from './client.ts';
import type {
  Agent, Member, CatalogService, ConnectorInfo, HarvestedEntity, Policy, PolicyDraft, PolicyPreview, PolicyVersion, SimulateResult,
} from './types.ts';

export type PolicySortKey = 'name' | 'policyKey' | 'service' | 'effect' | 'enabled' | 'createdAt' | 'updatedAt';

export interface PolicyListQuery {
  search?: string;
  service?: string;
  effect?: 'forbid' | 'permit';
  enabled?: 'true' | 'false';
  sortBy?: PolicySortKey;
  sortDir?: 'asc' | 'desc';
  limit?: number;
  offset?: number;
}

const base = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}/policies`;

export const policiesApi = {
  list: (agentId: string, query: PolicyListQuery = {}) =>
    api.get<{ policies: Policy[]; total: number }>(base(agentId), { ...query }),

  /**
   * One policy. The API has no single-policy read, so this pages through the list (200 per
   * page; agents hold few policies) and answers undefined when the id is not among them.
   */
  async get(agentId: string, policyId: string): Promise<Policy | undefined> {
    for (let offset = 0; offset < 10_000; offset += 200) {
      const page = await api.get<{ policies: Policy[]; total: number }>(base(agentId), { limit: 200, offset, sortBy: 'createdAt', sortDir: 'asc' });
      const found = page.policies.find((p) => p.id === policyId);
      if (found) return found;
      if (offset + page.policies.length >= page.total || page.policies.length === 0) return undefined;
    }
    return undefined;
  },

  create: (agentId: string, draft: PolicyDraft) => api.post<Policy>(base(agentId), draft),
  update: (agentId: string, policyId: string, draft: PolicyDraft) => api.put<Policy>(`${base(agentId)}/${encodeURIComponent(policyId)}`, draft),
  remove: (agentId: string, policyId: string) => api.delete(`${base(agentId)}/${encodeURIComponent(policyId)}`),
  toggle: (agentId: string, policyId: string) => api.post<Policy>(`${base(agentId)}/${encodeURIComponent(policyId)}/toggle`),
  versions: (agentId: string, policyId: string) =>
    api.get<{ versions: PolicyVersion[] }>(`${base(agentId)}/${encodeURIComponent(policyId)}/versions`),
  restore: (agentId: string, policyId: string, versionId: string) =>
    api.post<Policy>(`${base(agentId)}/${encodeURIComponent(policyId)}/versions/${encodeURIComponent(versionId)}/restore`),

  /** 200 even when the draft has errors: they are the answer. */
  preview: (agentId: string, draft: PolicyDraft) => api.post<PolicyPreview>(`${base(agentId)}/preview`, draft),
  simulate: (agentId: string, body: { draft: PolicyDraft; replacePolicyId?: string; from?: string; to?: string; limit?: number }) =>
    api.post<SimulateResult>(`${base(agentId)}/simulate`, body),
};

/** What the editor's pickers read. */
export const pickersApi = {
  agent: (agentId: string) => api.get<Agent>(`/api/agents/${encodeURIComponent(agentId)}`),
  connectors: () => api.get<{ connectors: ConnectorInfo[] }>('/api/connectors/meta'),
  catalog: (service: string) => api.get<{ services: CatalogService[]; total: number }>('/api/tools/catalog', { service }),
  members: (agentId: string) => api.get<{ members: Member[]; total: number }>(`/api/agents/${encodeURIComponent(agentId)}/members`, { limit: 500 }),
  entities: (agentId: string, service: string, type: string, search?: string) =>
    api.get<{ entities: HarvestedEntity[]; total: number }>(
      `/api/agents/${encodeURIComponent(agentId)}/entities/${encodeURIComponent(service)}/${encodeURIComponent(type)}`,
      { search, limit: 20 },
    ),
};

/**
 * Splits the API's `"<field>: <message>"` problem texts (preview errors, decision 011/012) into
 * the field they name and the readable rest; `cedar:` and unnamed problems have no field.
 */
export function splitProblem(problem: string): { field?: string; message: string } {
  const match = /^([A-Za-z][\w]*(?:\.[\w]+)*): (.*)$/s.exec(problem);
  if (!match || match[1] === 'cedar' || match[1] === 'draft') return { message: problem };
  return { field: match[1]!, message: match[2]! };
}
