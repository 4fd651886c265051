import type { Connector } from '@portcullis/core';
import { memberNameOf } from '../tools/words.ts';

/**
 * One record of a sandbox connector's data. `id` is the identifier the real service uses for
 * it (and the one Cedar resources name, e.g. `acme/api` for `GithubMCP::Repository`), `name`
 * is what a picker shows; the other fields carry the argument names the catalog's tools use,
 * so a call like `list_projects {teamId}` can filter on them.
 */
export interface SandboxEntity {
  id: string;
  name: string;
  [field: string]: unknown;
}

/** Seed data per connector, keyed by the catalog's entity type (`repositories`, `channels`…). */
type SeedTable = Record<string, Record<string, SandboxEntity[]>>;

const seedTable: SeedTable = {
  github: {
    repositories: [
      { id: 'acme/api', name: 'api', owner: 'acme', repo: 'api', full_name: 'acme/api', private: false, default_branch: 'main', description: 'Public HTTP API' },
      { id: 'acme/web', name: 'web', owner: 'acme', repo: 'web', full_name: 'acme/web', private: false, default_branch: 'main', description: 'Customer-facing web app' },
      { id: 'acme/infra', name: 'infra', owner: 'acme', repo: 'infra', full_name: 'acme/infra', private: true, default_branch: 'main', description: 'Deployment scripts' },
    ],
    organizations: [
      { id: 'acme', name: 'Acme Inc.', login: 'acme' },
      { id: 'acme-labs', name: 'Acme Labs', login: 'acme-labs' },
    ],
    teams: [
      { id: 'acme/platform', name: 'Platform', org: 'acme', team_slug: 'platform', members: ['alice', 'bob'] },
      { id: 'acme/security', name: 'Security', org: 'acme', team_slug: 'security', members: ['carol'] },
    ],
  },
  slack: {
    channels: [
      { id: 'C0001', name: 'general', channel_id: 'C0001', is_private: false, topic: 'Company-wide announcements' },
      { id: 'C0002', name: 'random', channel_id: 'C0002', is_private: false, topic: 'Anything goes' },
      { id: 'C0003', name: 'engineering', channel_id: 'C0003', is_private: false, topic: 'Engineering discussion' },
      { id: 'C0004', name: 'incidents', channel_id: 'C0004', is_private: true, topic: 'Incident response' },
    ],
    users: [
      { id: 'U0001', name: 'alice', user_id: 'U0001', real_name: 'Alice Doe', email: 'alice@example.com' },
      { id: 'U0002', name: 'bob', user_id: 'U0002', real_name: 'Bob Roe', email: 'bob@example.com' },
      { id: 'U0003', name: 'carol', user_id: 'U0003', real_name: 'Carol Poe', email: 'carol@example.com' },
    ],
  },
  linear: {
    teams: [
      { id: 'team_eng', name: 'Engineering', key: 'ENG' },
      { id: 'team_ops', name: 'Operations', key: 'OPS' },
    ],
    projects: [
      { id: 'proj_api_v2', name: 'API v2', team: 'ENG', state: 'started' },
      { id: 'proj_onboarding', name: 'Onboarding revamp', team: 'OPS', state: 'planned' },
    ],
  },
  stripe: {
    accounts: [{ id: 'acct_0001', name: 'Acme Inc.', country: 'US' }],
    customers: [
      { id: 'cus_0001', name: 'Alice Doe', email: 'alice@example.com' },
      { id: 'cus_0002', name: 'Bob Roe', email: 'bob@example.com' },
    ],
    products: [
      { id: 'prod_0001', name: 'Pro plan', active: true },
      { id: 'prod_0002', name: 'Team plan', active: true },
    ],
    subscriptions: [
      { id: 'sub_0001', name: 'Alice Doe: Pro plan', customer: 'cus_0001', product: 'prod_0001', status: 'active' },
      { id: 'sub_0002', name: 'Bob Roe: Team plan', customer: 'cus_0002', product: 'prod_0002', status: 'active' },
    ],
  },
  huggingface: {
    models: [
      { id: 'acme/sentiment-small', name: 'sentiment-small', author: 'acme', task: 'text-classification', library: 'transformers' },
      { id: 'acme/summarizer-base', name: 'summarizer-base', author: 'acme', task: 'summarization', library: 'transformers' },
    ],
    datasets: [
      { id: 'acme/support-tickets', name: 'support-tickets', author: 'acme' },
      { id: 'acme/product-reviews', name: 'product-reviews', author: 'acme' },
    ],
    spaces: [
      { id: 'acme/demo-chat', name: 'demo-chat', author: 'acme', sdk: 'gradio' },
      { id: 'acme/leaderboard', name: 'leaderboard', author: 'acme', sdk: 'streamlit' },
    ],
  },
  sentry: {
    organizations: [{ id: 'acme', name: 'Acme', slug: 'acme', organizationSlug: 'acme' }],
    projects: [
      { id: 'acme/backend', name: 'backend', slug: 'backend', organizationSlug: 'acme', projectSlug: 'backend', platform: 'node' },
      { id: 'acme/frontend', name: 'frontend', slug: 'frontend', organizationSlug: 'acme', projectSlug: 'frontend', platform: 'javascript-react' },
    ],
    teams: [
      { id: 'acme/platform', name: 'platform', slug: 'platform', organizationSlug: 'acme', teamSlug: 'platform' },
      { id: 'acme/mobile', name: 'mobile', slug: 'mobile', organizationSlug: 'acme', teamSlug: 'mobile' },
    ],
  },
  supabase: {
    organizations: [{ id: 'org_acme', name: 'Acme', organization_id: 'org_acme' }],
    projects: [
      { id: 'prj_acme_prod', name: 'acme-prod', organization_id: 'org_acme', region: 'us-east-1', status: 'ACTIVE_HEALTHY' },
      { id: 'prj_acme_staging', name: 'acme-staging', organization_id: 'org_acme', region: 'eu-west-1', status: 'ACTIVE_HEALTHY' },
    ],
    branches: [
      { id: 'br_develop', name: 'develop', project_id: 'prj_acme_prod' },
      { id: 'br_preview', name: 'feature-preview', project_id: 'prj_acme_prod' },
    ],
  },
  cloudflare: {
    accounts: [{ id: 'acc_acme', name: 'Acme', account_id: 'acc_acme' }],
    workers: [
      { id: 'api-gateway', name: 'api-gateway', account_id: 'acc_acme' },
      { id: 'image-resizer', name: 'image-resizer', account_id: 'acc_acme' },
    ],
    kv_namespaces: [
      { id: 'kv_sessions', name: 'sessions', title: 'sessions', account_id: 'acc_acme' },
      { id: 'kv_flags', name: 'feature-flags', title: 'feature-flags', account_id: 'acc_acme' },
    ],
    r2_buckets: [
      { id: 'assets', name: 'assets', account_id: 'acc_acme' },
      { id: 'backups', name: 'backups', account_id: 'acc_acme' },
    ],
    d1_databases: [
      { id: 'd1_main', name: 'main-db', account_id: 'acc_acme' },
      { id: 'd1_analytics', name: 'analytics', account_id: 'acc_acme' },
    ],
  },
  pagerduty: {
    services: [
      { id: 'PSV0001', name: 'API', status: 'active' },
      { id: 'PSV0002', name: 'Web', status: 'active' },
    ],
    teams: [
      { id: 'PTM0001', name: 'Platform' },
      { id: 'PTM0002', name: 'Security' },
    ],
    schedules: [
      { id: 'PSC0001', name: 'Platform primary' },
      { id: 'PSC0002', name: 'Security primary' },
    ],
    escalation_policies: [
      { id: 'PEP0001', name: 'Platform escalation' },
      { id: 'PEP0002', name: 'Security escalation' },
    ],
  },
  notion: {
    teamspaces: [
      { id: 'ts_engineering', name: 'Engineering' },
      { id: 'ts_company', name: 'Company' },
    ],
    pages: [
      { id: 'page_roadmap', name: 'Roadmap', title: 'Roadmap', teamspace: 'ts_engineering' },
      { id: 'page_oncall', name: 'On-call handbook', title: 'On-call handbook', teamspace: 'ts_engineering' },
      { id: 'page_holidays', name: 'Holidays', title: 'Holidays', teamspace: 'ts_company' },
    ],
    databases: [
      { id: 'db_tasks', name: 'Tasks' },
      { id: 'db_meetings', name: 'Meeting notes' },
    ],
  },
  atlassian: {
    sites: [{ id: 'cloud_acme', name: 'acme.atlassian.net', url: 'https://acme.atlassian.net' }],
    jira_projects: [
      { id: 'ENG', name: 'Engineering', key: 'ENG', cloudId: 'cloud_acme' },
      { id: 'OPS', name: 'Operations', key: 'OPS', cloudId: 'cloud_acme' },
    ],
    confluence_spaces: [
      { id: 'space_eng', name: 'Engineering', key: 'ENG', cloudId: 'cloud_acme' },
      { id: 'space_hr', name: 'People', key: 'HR', cloudId: 'cloud_acme' },
    ],
  },
  gdrive: {
    shared_drives: [
      { id: 'drive_eng', name: 'Engineering' },
      { id: 'drive_finance', name: 'Finance' },
    ],
    folders: [
      { id: 'folder_specs', name: 'Specs', driveId: 'drive_eng' },
      { id: 'folder_reports', name: 'Reports', driveId: 'drive_finance' },
    ],
    files: [
      { id: 'file_roadmap', name: 'Roadmap 2026', mimeType: 'application/vnd.google-apps.document', parentId: 'folder_specs' },
      { id: 'file_budget', name: 'Budget', mimeType: 'application/vnd.google-apps.spreadsheet', parentId: 'folder_reports' },
    ],
  },
  gmail: {
    labels: [
      { id: 'INBOX', name: 'INBOX', type: 'system' },
      { id: 'Label_1', name: 'Receipts', type: 'user' },
      { id: 'Label_2', name: 'Travel', type: 'user' },
    ],
  },
  gcalendar: {
    calendars: [
      { id: 'primary', name: 'Primary calendar' },
      { id: 'team@group.calendar.example', name: 'Team' },
    ],
  },
  airtable: {
    workspaces: [{ id: 'wspAcme', name: 'Acme' }],
    bases: [
      { id: 'appSales', name: 'Sales CRM', workspaceId: 'wspAcme' },
      { id: 'appHiring', name: 'Hiring', workspaceId: 'wspAcme' },
    ],
    tables: [
      { id: 'appSales/tblDeals', name: 'Deals', baseId: 'appSales', tableId: 'tblDeals' },
      { id: 'appSales/tblContacts', name: 'Contacts', baseId: 'appSales', tableId: 'tblContacts' },
      { id: 'appHiring/tblCandidates', name: 'Candidates', baseId: 'appHiring', tableId: 'tblCandidates' },
    ],
  },
  vercel: {
    teams: [{ id: 'team_acme', name: 'Acme', slug: 'acme', teamId: 'team_acme' }],
    projects: [
      { id: 'prj_web', name: 'web', teamId: 'team_acme', projectId: 'prj_web', framework: 'nextjs' },
      { id: 'prj_docs', name: 'docs', teamId: 'team_acme', projectId: 'prj_docs', framework: 'astro' },
    ],
  },
};

/**
 * Entities for a type the table above does not list (a catalog addition): two records with
 * readable ids, so every entity type always has data.
 */
function generatedEntities(entityType: string): SandboxEntity[] {
  const member = memberNameOf(entityType);
  return [1, 2].map((n) => ({ id: `${member}-${n}`, name: `${member.replace(/_/g, ' ')} ${n}` }));
}

/**
 * The data a freshly started sandbox holds for `connector`: one collection per entity type
 * of the catalog. Deterministic, and a fresh copy on every call.
 */
export function seedCollectionsOf(connector: Pick<Connector, 'key' | 'entityTypes'>): Map<string, SandboxEntity[]> {
  const table = seedTable[connector.key] ?? {};
  return new Map(connector.entityTypes.map((type) => [type, structuredClone(table[type] ?? generatedEntities(type))]));
}
