/**
 * Typed calls for the policy pages: the agent's policies (decision 012), preview and simulate
 * (decision 013), versions, and what the editor's pickers read (catalog, connectors, members,
 * harvested entities). Every call throws `ApiError` on a non-2xx answer.
 */
import { call, http, query } from './client.ts';
import type { ConnectorKey, PolicyDraft, PolicyEffect, SimulateBody } from './types.ts';

export type PolicySortKey = 'name' | 'policyKey' | 'service' | 'effect' | 'enabled' | 'createdAt' | 'updatedAt';

export interface PolicyListQuery {
  search?: string;
  service?: string;
  effect?: PolicyEffect;
  enabled?: 'true' | 'false';
  mode?: 'enforce' | 'shadow';
  sortBy?: PolicySortKey;
  sortDir?: 'asc' | 'desc';
  limit?: number;
  offset?: number;
}

const agent = (id: string) => ({ params: { path: { id } } });
const policy = (id: string, policyId: string) => ({ params: { path: { id, policyId } } });

export const policiesApi = {
  list: (agentId: string, q: PolicyListQuery = {}) =>
    call(http.GET('/api/agents/{id}/policies', { params: { path: { id: agentId }, query: query(q) } })),

  /**
   * One policy. The API has no single-policy read, so this pages through the list (200 per
   * page; agents hold few policies) and answers undefined when the id is not among them.
   */
  async get(agentId: string, policyId: string) {
    for (let offset = 0; offset < 10_000; offset += 200) {
      const page = await policiesApi.list(agentId, { limit: 200, offset, sortBy: 'createdAt', sortDir: 'asc' });
      const found = page.policies.find((p) => p.id === policyId);
      if (found) return found;
      if (offset + page.policies.length >= page.total || page.policies.length === 0) return undefined;
    }
    return undefined;
  },

  create: (agentId: string, draft: PolicyDraft) => call(http.POST('/api/agents/{id}/policies', { ...agent(agentId), body: draft })),
  update: (agentId: string, policyId: string, draft: PolicyDraft) =>
    call(http.PUT('/api/agents/{id}/policies/{policyId}', { ...policy(agentId, policyId), body: draft })),
  remove: (agentId: string, policyId: string) => call(http.DELETE('/api/agents/{id}/policies/{policyId}', policy(agentId, policyId))),
  toggle: (agentId: string, policyId: string) => call(http.POST('/api/agents/{id}/policies/{policyId}/toggle', policy(agentId, policyId))),
  versions: (agentId: string, policyId: string) => call(http.GET('/api/agents/{id}/policies/{policyId}/versions', policy(agentId, policyId))),
  /** A shadow policy starts being enforced, as one new version (decision 061). */
  promote: (agentId: string, policyId: string) => call(http.POST('/api/agents/{id}/policies/{policyId}/promote', policy(agentId, policyId))),
  /** What a shadow policy would have changed since it went into shadow (decision 062). */
  shadow: (agentId: string, policyId: string, samples = 10) =>
    call(http.GET('/api/agents/{id}/policies/{policyId}/shadow', { params: { path: { id: agentId, policyId }, query: { samples } } })),
  restore: (agentId: string, policyId: string, versionId: string) =>
    call(http.POST('/api/agents/{id}/policies/{policyId}/versions/{versionId}/restore', { params: { path: { id: agentId, policyId, versionId } } })),

  /** 200 even when the draft has errors: they are the answer. */
  preview: (agentId: string, draft: PolicyDraft) => call(http.POST('/api/agents/{id}/policies/preview', { ...agent(agentId), body: draft })),
  simulate: (agentId: string, body: SimulateBody) => call(http.POST('/api/agents/{id}/policies/simulate', { ...agent(agentId), body })),
};

/** What the editor's pickers read. */
export const pickersApi = {
  agent: (agentId: string) => call(http.GET('/api/agents/{id}', agent(agentId))),
  connectors: () => call(http.GET('/api/connectors/meta')),
  catalog: (service: string) => call(http.GET('/api/tools/catalog', { params: { query: { service: service as ConnectorKey } } })),
  members: (agentId: string) => call(http.GET('/api/agents/{id}/members', { params: { path: { id: agentId }, query: { limit: 500 } } })),
  entities: (agentId: string, service: string, type: string, search?: string) =>
    call(http.GET('/api/agents/{id}/entities/{service}/{type}', { params: { path: { id: agentId, service: service as ConnectorKey, type }, query: query({ search, limit: 20 }) } })),
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
