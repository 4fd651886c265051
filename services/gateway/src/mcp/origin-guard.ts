import { isLoopbackHostname } from '@portcullis/core';
import type { IncomingHttpHeaders } from 'node:http';

/** Who may reach `/mcp` from a browser, and under which host name (decision 024). */
export interface McpOriginPolicy {
  /** The gateway's public address (PUBLIC_URL, or the address it listens on). */
  publicUrl: string;
  /** `MCP_ALLOWED_ORIGINS`, normalised origins. */
  allowedOrigins: readonly string[];
  /** Outside production: any loopback origin (`http://localhost:5173`, `http://127.0.0.1:6274`, …). */
  allowLoopbackOrigins: boolean;
  /** Where the gateway listens (`HOST`). Bound to loopback, the `Host` header must name loopback or the public host. */
  listenHost: string;
}

/** Loopback names (shared with the audit sinks' URL rule, decision 058). */
export { isLoopbackHostname };

function parsed(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

const shown = (value: string) => JSON.stringify(value.slice(0, 200));

/**
 * The MCP transport's DNS-rebinding rule, as one check run before anything else on `/mcp`:
 * returns why a request must be refused (403), or undefined to serve it.
 *
 * - `Origin` absent (agents, SDK clients, curl): served. Present, it must be the public URL's
 *   origin, a listed one, or (outside production) a loopback origin; `null` and anything
 *   unparsable are refused.
 * - `Host`, only when the gateway listens on loopback: a page on a rebound name
 *   (`evil.example` → 127.0.0.1) arrives with that name in `Host`, so anything but loopback
 *   names and the public URL's host is refused. Bound to other interfaces, a load balancer's
 *   internal names are legitimate and the `Origin` rule carries the protection.
 */
export function createOriginCheck(policy: McpOriginPolicy): (headers: IncomingHttpHeaders) => string | undefined {
  const publicUrl = new URL(policy.publicUrl);
  const origins = new Set([publicUrl.origin, ...policy.allowedOrigins]);
  const checkHost = isLoopbackHostname(policy.listenHost);
  const publicHostname = publicUrl.hostname.toLowerCase();

  return (headers) => {
    if (checkHost) {
      const host = headers.host;
      const hostname = host ? parsed(`http://${host}`)?.hostname.toLowerCase() : undefined;
      if (!hostname || !(isLoopbackHostname(hostname) || hostname === publicHostname)) {
        return `Forbidden: this server does not answer for host ${shown(host ?? '')}`;
      }
    }
    const origin = headers.origin;
    if (origin === undefined) return undefined;
    const url = origin === 'null' ? undefined : parsed(origin);
    const web = url !== undefined && (url.protocol === 'http:' || url.protocol === 'https:');
    if (web && (origins.has(url.origin) || (policy.allowLoopbackOrigins && isLoopbackHostname(url.hostname)))) return undefined;
    return `Forbidden: requests from origin ${shown(origin)} are not accepted (an operator can allow it with MCP_ALLOWED_ORIGINS)`;
  };
}
