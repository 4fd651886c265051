import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { getConnector, inputSchemaOf, prefixedToolName } from '@portcullis/core';
import type { MemberContext } from '../modules/identity/member-context.ts';

const toolsByService = new Map<string, Tool[]>();

/** The `/mcp` view of one connector's tools: prefixed names, schemas and `_meta`, built once. */
function toolsOf(service: string): Tool[] {
  let tools = toolsByService.get(service);
  if (!tools) {
    const connector = getConnector(service);
    tools = (connector?.tools ?? []).map((t): Tool => ({
      name: prefixedToolName(service, t.name),
      description: t.description,
      inputSchema: { ...inputSchemaOf(t) },
      _meta: { portcullis_service: service, portcullis_service_label: connector!.label },
    }));
    toolsByService.set(service, tools);
  }
  return tools;
}

/** Connectors that are both enabled on the caller's agent and connected by the caller. */
export function usableServices(context: MemberContext): string[] {
  const connected = new Set(context.connections.map((c) => c.service));
  return context.allowedServices.filter((s) => connected.has(s));
}

/** What `tools/list` shows this caller. */
export function listToolsFor(context: MemberContext): Tool[] {
  return usableServices(context).flatMap(toolsOf);
}
