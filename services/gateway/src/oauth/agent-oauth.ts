import type { OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { Bus, Database } from '@portcullis/core';
import { createAgentClients } from './agent-clients.ts';
import { createAgentTokenResolver, type AgentTokenResolver } from './agent-token-resolver.ts';
import { createGrantStore, type GrantStore } from './grant-store.ts';
import { createAgentOAuthProvider, oauthUrlsOf } from './oauth-provider.ts';

/** Portcullis as the authorization server of its own `/mcp`, wired (decisions 050–054). */
export interface AgentOAuth {
  provider: OAuthServerProvider;
  grants: GrantStore;
  /** Access tokens to `/mcp` callers, from per-replica memory. */
  tokens: AgentTokenResolver;
  urls: ReturnType<typeof oauthUrlsOf>;
}

export function createAgentOAuth(deps: { db: Database; bus: Bus; secret: string; publicUrl: string; now?: () => number }): AgentOAuth {
  const grants = createGrantStore(deps);
  const tokens = createAgentTokenResolver(deps);
  const provider = createAgentOAuthProvider({ clients: createAgentClients(deps.db), grants, resolver: tokens, secret: deps.secret, publicUrl: deps.publicUrl, ...(deps.now ? { now: deps.now } : {}) });
  return { provider, grants, tokens, urls: oauthUrlsOf(deps.publicUrl) };
}
