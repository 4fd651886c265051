import { actionUid, cedarNamespace, connectors, type Tier } from '@portcullis/core';

/** A catalog tool as a Cedar request names it; built once, shared by every request. */
export interface CatalogAction {
  /** The action entity as Cedar's JSON wants it: `{type: "GithubMCP::Action", id: "create_issue"}`. */
  readonly entity: { readonly type: string; readonly id: string };
  /** The same, as audit entries print it: `GithubMCP::Action::"create_issue"`. */
  readonly uid: string;
  readonly tier: Tier;
}

const index = new Map<string, Map<string, CatalogAction>>(
  connectors.map((c) => [
    c.key,
    new Map(c.tools.map((t) => [t.name, Object.freeze({
      entity: Object.freeze({ type: `${cedarNamespace(c.key)}::Action`, id: t.name }),
      uid: actionUid(c.key, t.name),
      tier: t.tier,
    })])),
  ]),
);

/** The catalog action for `service`/`tool`, or undefined when the catalog has no such tool. */
export function catalogAction(service: string, tool: string): CatalogAction | undefined {
  return index.get(service)?.get(tool);
}
