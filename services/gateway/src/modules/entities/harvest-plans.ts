import type { EntityRecord } from './entity-store.ts';

/** One object of a tool result's record list, as the connector returned it. */
export type ResultRecord = Readonly<Record<string, unknown>>;

/** Reads a value (an id, a name) from a result record; `parent` is set for fanned-out calls. */
export type RecordField = (record: ResultRecord, parent?: EntityRecord) => unknown;

/** How a list tool pages: the size argument always, a page-number argument when it has one. */
export interface PagePlan {
  /** Argument that sets the page size (`perPage`, `limit`, `pageSize`…). */
  sizeArgument: string;
  /** The size asked for; the tool's own maximum where it documents one. */
  size: number;
  /**
   * Argument taking the 1-based page number, for tools that page by number. Without it only
   * the first page is read, and a full page marks the type partial (there may be more).
   */
  pageArgument?: string;
}

/** A type read with a read-tier list tool of the connector. */
export interface ToolHarvestPlan {
  kind: 'tool';
  /** A catalog entity type, or a helper's own name (see `helper`). */
  type: string;
  tool: string;
  /** Arguments of every call. */
  args?: Readonly<Record<string, unknown>>;
  /**
   * Fan-out: one call per record of another type of the same connector (harvested first),
   * with these arguments added (`{account_id: parent.id}`).
   */
  perParent?: { type: string; args: (parent: EntityRecord) => Record<string, unknown> };
  page?: PagePlan;
  /** Where the records are in the result's JSON (dot-separated): a list, e.g. `items`. */
  recordsAt: string;
  /** The result holds one record there (a "who am I" answer), not a list. */
  single?: true;
  /** The identifier policies name (Cedar resource ids: `acme/api`, `C0001`, `appSales/tblDeals`). */
  id: RecordField;
  /** What a picker shows; the id when this yields nothing. */
  name: RecordField;
  /** Display fields copied when they are strings, numbers or booleans. */
  attributes?: readonly string[];
  /** Attribute that records the parent's id on fanned-out records (`project_id` on a branch). */
  parentAttribute?: string;
  /** Drops records a search answered that are not the parent's own (a free-text search finds more). */
  keep?: (record: ResultRecord, parent?: EntityRecord) => boolean;
  /** Read only to fan out over or derive from: never reported or stored. */
  helper?: true;
}

/** A type no tool lists, made of values other harvested types carry (teams' `org`). */
export interface DerivedHarvestPlan {
  kind: 'derived';
  type: string;
  /** Each source: a type of the connector, and the attribute (or `id`) whose values are the ids. */
  from: ReadonlyArray<{ type: string; field: string }>;
  helper?: true;
}

export type HarvestPlan = ToolHarvestPlan | DerivedHarvestPlan;

/** Everything a harvest of one connector does, and what it leaves out. */
export interface ConnectorHarvestPlan {
  /** Any order: a type runs once the types it fans out over or derives from are done. */
  plans: readonly HarvestPlan[];
  /** Catalog entity types no harvest fills, and why; webhooks may still fill them. */
  notHarvestable: Readonly<Record<string, string>>;
}

/** The first of `names` that is present and not empty. */
export function first(...names: string[]): RecordField {
  return (record) => names.map((n) => record[n]).find((v) => v !== undefined && v !== null && v !== '');
}

/**
 * `<parent id>/<the first present of names>`, unless that value is already prefixed:
 * Cedar names children of a parent by both (`acme/backend` for a Sentry project, the
 * `organizationSlug/projectSlug` of the call's arguments).
 */
export function underParent(...names: string[]): RecordField {
  const own = first(...names);
  return (record, parent) => {
    const value = own(record);
    if (typeof value !== 'string' || parent === undefined) return value;
    return value.startsWith(`${parent.id}/`) ? value : `${parent.id}/${value}`;
  };
}

const name = first('name', 'title', 'displayName');

/**
 * Searches that must be scoped to the member (public universes: every GitHub repository, every
 * Hugging Face model) read the member's own login first, with the connector's "who am I" tool.
 */
function identityHelper(tool: string): ToolHarvestPlan {
  return { kind: 'tool', type: 'me', tool, recordsAt: 'item', single: true, id: first('login', 'id'), name: first('name', 'login'), helper: true };
}

/**
 * The harvest plan of every catalog connector, by connector key. Arguments are what the real
 * servers take (the catalog's parameters); a harvest reads one page of each list unless the
 * tool pages by number (see `PagePlan`). See docs/decisions/008-entity-harvesting.md.
 */
export const harvestPlans: Readonly<Record<string, ConnectorHarvestPlan>> = {
  github: {
    plans: [
      identityHelper('get_me'),
      // Without `user`, the authenticated member's teams.
      { kind: 'tool', type: 'teams', tool: 'get_teams', recordsAt: 'items', id: (r) => (typeof r.org === 'string' && typeof r.team_slug === 'string' ? `${r.org}/${r.team_slug}` : r.id), name, attributes: ['org', 'team_slug'] },
      // Accounts whose repositories are searched: the member and the organizations of their teams.
      { kind: 'derived', type: 'owners', from: [{ type: 'me', field: 'id' }, { type: 'teams', field: 'org' }], helper: true },
      {
        kind: 'tool', type: 'repositories', tool: 'search_repositories',
        perParent: { type: 'owners', args: (owner) => ({ query: `user:${owner.id} fork:true` }) },
        page: { sizeArgument: 'perPage', size: 100, pageArgument: 'page' },
        recordsAt: 'items', id: first('full_name', 'id'), name, attributes: ['owner', 'private', 'default_branch', 'description'],
      },
      // Cedar names a repository's owner `GithubMCP::Organization` (resource rule `owner`), so owners count.
      { kind: 'derived', type: 'organizations', from: [{ type: 'teams', field: 'org' }, { type: 'repositories', field: 'owner' }] },
    ],
    notHarvestable: {},
  },
  slack: {
    plans: [
      // An empty query matches every channel (and user) the token can see.
      { kind: 'tool', type: 'channels', tool: 'slack_search_channels', args: { query: '', channel_types: 'public_channel,private_channel' }, page: { sizeArgument: 'limit', size: 200 }, recordsAt: 'items', id: first('channel_id', 'id'), name, attributes: ['is_private', 'topic'] },
      { kind: 'tool', type: 'users', tool: 'slack_search_users', args: { query: '' }, page: { sizeArgument: 'limit', size: 200 }, recordsAt: 'items', id: first('user_id', 'id'), name, attributes: ['real_name'] },
    ],
    notHarvestable: {},
  },
  linear: {
    plans: [
      { kind: 'tool', type: 'teams', tool: 'list_teams', page: { sizeArgument: 'limit', size: 250 }, recordsAt: 'items', id: first('id'), name, attributes: ['key'] },
      { kind: 'tool', type: 'projects', tool: 'list_projects', page: { sizeArgument: 'limit', size: 250 }, recordsAt: 'items', id: first('id'), name, attributes: ['state', 'team'] },
    ],
    notHarvestable: {},
  },
  stripe: {
    plans: [
      { kind: 'tool', type: 'customers', tool: 'list_customers', page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name: first('name', 'email'), attributes: [] },
      { kind: 'tool', type: 'products', tool: 'list_products', page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: ['active'] },
      { kind: 'tool', type: 'subscriptions', tool: 'list_subscriptions', page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: ['status', 'customer'] },
    ],
    notHarvestable: {
      accounts: 'No read tool of the Stripe server lists or names the connected account (retrieve_balance carries no account id).',
    },
  },
  huggingface: {
    plans: [
      identityHelper('hf_whoami'),
      // The Hub's searches cover every public repository; the member's own namespace is what they own.
      { kind: 'tool', type: 'models', tool: 'model_search', perParent: { type: 'me', args: (me) => ({ author: me.id }) }, page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: ['task', 'library'] },
      { kind: 'tool', type: 'datasets', tool: 'dataset_search', perParent: { type: 'me', args: (me) => ({ author: me.id }) }, page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: [] },
      // space_search has no author filter: search for the namespace, keep the namespace's own.
      {
        kind: 'tool', type: 'spaces', tool: 'space_search', perParent: { type: 'me', args: (me) => ({ query: me.id }) }, page: { sizeArgument: 'limit', size: 100 },
        recordsAt: 'items', id: first('id'), name, attributes: ['sdk'],
        keep: (r, me) => (typeof r.author === 'string' ? r.author === me?.id : typeof r.id === 'string' && r.id.startsWith(`${me?.id}/`)),
      },
    ],
    notHarvestable: {},
  },
  sentry: {
    plans: [
      { kind: 'tool', type: 'organizations', tool: 'find_organizations', recordsAt: 'items', id: first('slug', 'id'), name, attributes: [] },
      { kind: 'tool', type: 'projects', tool: 'find_projects', perParent: { type: 'organizations', args: (org) => ({ organizationSlug: org.id }) }, recordsAt: 'items', id: underParent('slug', 'projectSlug'), name, attributes: ['platform'], parentAttribute: 'organizationSlug' },
      { kind: 'tool', type: 'teams', tool: 'find_teams', perParent: { type: 'organizations', args: (org) => ({ organizationSlug: org.id }) }, recordsAt: 'items', id: underParent('slug', 'teamSlug'), name, attributes: [], parentAttribute: 'organizationSlug' },
    ],
    notHarvestable: {},
  },
  supabase: {
    plans: [
      { kind: 'tool', type: 'organizations', tool: 'list_organizations', recordsAt: 'items', id: first('id'), name, attributes: [] },
      { kind: 'tool', type: 'projects', tool: 'list_projects', recordsAt: 'items', id: first('id'), name, attributes: ['organization_id', 'region', 'status'] },
      { kind: 'tool', type: 'branches', tool: 'list_branches', perParent: { type: 'projects', args: (project) => ({ project_id: project.id }) }, recordsAt: 'items', id: first('id'), name, attributes: [], parentAttribute: 'project_id' },
    ],
    notHarvestable: {},
  },
  cloudflare: {
    plans: [
      // `account_id` is optional: without it the tools read the token's active account.
      { kind: 'tool', type: 'workers', tool: 'workers_list', recordsAt: 'items', id: first('id'), name, attributes: ['account_id'] },
      { kind: 'tool', type: 'kv_namespaces', tool: 'kv_namespaces_list', recordsAt: 'items', id: first('id'), name: first('title', 'name'), attributes: ['account_id'] },
      { kind: 'tool', type: 'r2_buckets', tool: 'r2_buckets_list', page: { sizeArgument: 'per_page', size: 1000 }, recordsAt: 'items', id: first('name', 'id'), name, attributes: ['account_id'] },
      { kind: 'tool', type: 'd1_databases', tool: 'd1_databases_list', page: { sizeArgument: 'per_page', size: 100, pageArgument: 'page' }, recordsAt: 'items', id: first('uuid', 'id'), name, attributes: ['account_id'] },
      // No tool lists accounts; every resource names its own.
      { kind: 'derived', type: 'accounts', from: ['workers', 'kv_namespaces', 'r2_buckets', 'd1_databases'].map((type) => ({ type, field: 'account_id' })) },
    ],
    notHarvestable: {},
  },
  pagerduty: {
    plans: [
      { kind: 'tool', type: 'services', tool: 'list_services', page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: ['status'] },
      { kind: 'tool', type: 'teams', tool: 'list_teams', page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: [] },
      { kind: 'tool', type: 'schedules', tool: 'list_schedules', args: { query_model: { limit: 100 } }, recordsAt: 'items', id: first('id'), name, attributes: [] },
      { kind: 'tool', type: 'escalation_policies', tool: 'list_escalation_policies', page: { sizeArgument: 'limit', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: [] },
    ],
    notHarvestable: {},
  },
  notion: {
    plans: [
      // An empty query lists the pages the integration can see, most relevant first.
      { kind: 'tool', type: 'pages', tool: 'notion-search', args: { query: '' }, recordsAt: 'items', id: first('id'), name, attributes: ['teamspace'] },
    ],
    notHarvestable: {
      teamspaces: 'notion-get-teams is the only tool that names teamspaces and the sandbox keeps no data for it; search results do not reliably carry their teamspace.',
      databases: 'No tool lists databases: notion-search answers pages, and a database is only reachable by a known id (notion-fetch).',
    },
  },
  atlassian: {
    plans: [
      { kind: 'tool', type: 'sites', tool: 'getAccessibleAtlassianResources', recordsAt: 'items', id: first('id'), name: first('name', 'url'), attributes: ['url'] },
      // Cedar names a Jira project by the `projectIdOrKey` argument; the key is what people write.
      { kind: 'tool', type: 'jira_projects', tool: 'getVisibleJiraProjects', perParent: { type: 'sites', args: (site) => ({ cloudId: site.id }) }, page: { sizeArgument: 'maxResults', size: 50 }, recordsAt: 'items', id: first('key', 'id'), name, attributes: [], parentAttribute: 'cloudId' },
      { kind: 'tool', type: 'confluence_spaces', tool: 'getConfluenceSpaces', perParent: { type: 'sites', args: (site) => ({ cloudId: site.id }) }, page: { sizeArgument: 'limit', size: 250 }, recordsAt: 'items', id: first('id'), name, attributes: ['key'], parentAttribute: 'cloudId' },
    ],
    notHarvestable: {},
  },
  gdrive: {
    plans: [
      { kind: 'tool', type: 'files', tool: 'search_files', args: { excludeContentSnippets: true }, page: { sizeArgument: 'pageSize', size: 100 }, recordsAt: 'items', id: first('id'), name, attributes: ['mimeType'] },
    ],
    notHarvestable: {
      shared_drives: 'No tool of the Drive server lists shared drives, and files do not name their drive.',
      folders: 'No tool lists folders; files name only the id of their parent, which is no use in a picker.',
    },
  },
  gmail: {
    plans: [
      { kind: 'tool', type: 'labels', tool: 'list_labels', page: { sizeArgument: 'pageSize', size: 500 }, recordsAt: 'items', id: first('id'), name, attributes: ['type'] },
    ],
    notHarvestable: {},
  },
  gcalendar: {
    plans: [
      { kind: 'tool', type: 'calendars', tool: 'list_calendars', page: { sizeArgument: 'pageSize', size: 250 }, recordsAt: 'items', id: first('id'), name: first('name', 'summary'), attributes: [] },
    ],
    notHarvestable: {},
  },
  airtable: {
    plans: [
      { kind: 'tool', type: 'workspaces', tool: 'list_workspaces', recordsAt: 'items', id: first('id'), name, attributes: [] },
      { kind: 'tool', type: 'bases', tool: 'list_bases', recordsAt: 'items', id: first('id'), name, attributes: ['workspaceId'] },
      // Cedar names a table `baseId/tableId` (the two arguments of the table tools).
      { kind: 'tool', type: 'tables', tool: 'list_tables_for_base', perParent: { type: 'bases', args: (base) => ({ baseId: base.id }) }, recordsAt: 'items', id: underParent('tableId', 'id'), name, attributes: [], parentAttribute: 'baseId' },
    ],
    notHarvestable: {},
  },
  vercel: {
    plans: [
      { kind: 'tool', type: 'teams', tool: 'list_teams', recordsAt: 'items', id: first('id', 'teamId'), name, attributes: ['slug'] },
      { kind: 'tool', type: 'projects', tool: 'list_projects', perParent: { type: 'teams', args: (team) => ({ teamId: team.id }) }, recordsAt: 'items', id: first('id', 'projectId'), name, attributes: ['framework'], parentAttribute: 'teamId' },
    ],
    notHarvestable: {},
  },
};

/** The types a plan needs done before it runs: its fan-out parent, or its derivation sources. */
export function dependenciesOf(plan: HarvestPlan): string[] {
  if (plan.kind === 'derived') return [...new Set(plan.from.map((s) => s.type))];
  return plan.perParent ? [plan.perParent.type] : [];
}
