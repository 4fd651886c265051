import { ApiError, getConnector } from '@portcullis/core';
import type { UpstreamPool } from '../../clients/upstream-pool.ts';
import type { MemberKeyResolver } from '../identity/member-key-resolver.ts';
import { ReauthRequired, type SealedTokens } from '../connections/sealed-tokens.ts';
import type { EntityStore } from './entity-store.ts';
import { harvestAndStore } from './harvester.ts';

/** What a refresh found, per entity type: counts only, never the entities or tokens. */
export interface RefreshSummary {
  service: string;
  harvested: Record<string, number>;
  failed: Record<string, string>;
  partial: Record<string, string>;
}

/**
 * Harvests a connector's entities again, on demand, with the caller's own connection. The
 * tokens are sealed to the member's vault, so this needs the member key (as `/mcp` does):
 * the caller presents it as a Bearer token and the harvest runs as that member.
 */
export function createEntityRefresh(deps: {
  resolver: MemberKeyResolver;
  tokens: SealedTokens;
  upstream: UpstreamPool;
  store: EntityStore;
  upstreamUrls: Record<string, string>;
}) {
  return {
    async refresh(memberKey: string | undefined, agentId: string, service: string): Promise<RefreshSummary> {
      const context = memberKey ? await deps.resolver.resolve(memberKey) : undefined;
      if (!context) throw new ApiError('unauthenticated', 'Present your member key: Authorization: Bearer pcm_…');
      // A key of another agent learns nothing about this one.
      if (context.agentId !== agentId) throw new ApiError('not_found', 'Agent not found.');
      if (context.agentStatus === 'disabled') throw new ApiError('forbidden', 'This agent is disabled.');
      if (context.memberStatus !== 'approved') throw new ApiError('forbidden', 'Your membership of this agent is still pending approval.');
      const label = getConnector(service)!.label;
      if (!context.allowedServices.includes(service)) throw new ApiError('conflict', `${label} is not enabled on this agent.`, { reason: 'service_not_enabled' });
      const connection = context.connections.find((c) => c.service === service);
      if (!connection) throw new ApiError('conflict', `You have not connected ${label} on this agent.`, { reason: 'not_connected' });

      const holder = { agentId, vaultPrivateKey: context.vaultPrivateKey };
      let tokens;
      try {
        tokens = deps.tokens.current(holder, connection);
        if (tokens.refreshToken && deps.tokens.isExpiring(tokens)) tokens = await deps.tokens.refresh(holder, connection, tokens);
      } catch (err) {
        if (err instanceof ReauthRequired) throw new ApiError('conflict', `${label} needs to be reconnected: ${err.message}`, { reason: 'needs_reauth' });
        throw err;
      }
      const accessToken = tokens.accessToken;
      const result = await harvestAndStore(deps.store, { agentId, memberId: context.memberId, service }, (tool, args) =>
        deps.upstream.callTool({ memberId: context.memberId, service, url: deps.upstreamUrls[service]!, accessToken }, tool, args));
      return {
        service,
        harvested: Object.fromEntries(Object.entries(result.types).map(([type, records]) => [type, records.length])),
        failed: result.failed,
        partial: result.partial,
      };
    },
  };
}

export type EntityRefresh = ReturnType<typeof createEntityRefresh>;
