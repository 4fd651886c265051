import { connectors, inputSchemaOf, type Connector, type ToolInputSchema } from '@portcullis/core';
import { EntityStore } from './store/entity-store.ts';
import { seedCollectionsOf } from './store/seed-data.ts';
import { planConnectorTools, type ToolPlan } from './tools/tool-plan.ts';

/** A tool as the sandbox's `tools/list` shows it: the catalog's name, description and schema. */
export interface ListedTool {
  name: string;
  description: string;
  inputSchema: ToolInputSchema;
}

/** One stand-in upstream: a catalog connector, its tool plans and its live data. */
export interface SandboxConnector {
  readonly connector: Connector;
  readonly plans: ReadonlyMap<string, ToolPlan>;
  readonly listedTools: readonly ListedTool[];
  readonly store: EntityStore;
}

/** Plans and listings depend only on the catalog, so every sandbox shares them. */
const catalogParts = connectors.map((connector) => ({
  connector,
  plans: planConnectorTools(connector),
  listedTools: connector.tools.map((tool): ListedTool => ({ name: tool.name, description: tool.description, inputSchema: inputSchemaOf(tool) })),
}));

/** Fresh stand-ins for all 16 connectors, each with its seed data, keyed by connector key. */
export function createSandboxConnectors(): Map<string, SandboxConnector> {
  return new Map(catalogParts.map((parts) => [parts.connector.key, { ...parts, store: new EntityStore(seedCollectionsOf(parts.connector)) }]));
}
