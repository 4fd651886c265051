import { getContext, setContext } from 'svelte';
import { getAgent } from './api/agents.ts';
import type { Agent } from './api/types.ts';

/**
 * The agent an `/agents/[id]/…` page is about, loaded once by the agent layout and shared
 * with its tabs through context. Pages call `reload()` after a change that alters the header
 * (name, status, enabled connectors) or the caller's role.
 */
export class AgentPageState {
  id = $state('');
  agent = $state<Agent | undefined>();
  error = $state<unknown>();
  loading = $state(false);
  #generation = 0;

  /** Approved owner: may do everything the owner-only routes allow. */
  get isOwner(): boolean {
    return this.agent?.membership.role === 'owner' && this.agent.membership.status === 'approved';
  }
  get isApproved(): boolean {
    return this.agent?.membership.status === 'approved';
  }

  async load(id: string): Promise<void> {
    const generation = ++this.#generation;
    if (id !== this.id) { this.agent = undefined; this.id = id; }
    this.loading = true;
    this.error = undefined;
    try {
      const agent = await getAgent(id);
      if (generation === this.#generation) this.agent = agent;
    } catch (err) {
      if (generation === this.#generation) { this.error = err; this.agent = undefined; }
    } finally {
      if (generation === this.#generation) this.loading = false;
    }
  }

  reload(): Promise<void> {
    return this.load(this.id);
  }

  /** A change answered with the new agent (PUT …/status, …/services, …): no second request. */
  set(agent: Agent): void {
    if (agent.id === this.id) this.agent = agent;
  }
}

const KEY = Symbol('agent-page');

export function setAgentContext(state: AgentPageState): AgentPageState {
  return setContext(KEY, state);
}

export function agentContext(): AgentPageState {
  const state = getContext<AgentPageState | undefined>(KEY);
  if (!state) throw new Error('agentContext() is only available under /agents/[id]');
  return state;
}
