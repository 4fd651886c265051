import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connectors } from '@portcullis/core';
import { first, harvestPlans } from './harvest-plans.ts';
import { harvestEntities, type ToolCaller } from './harvester.ts';

/**
 * The real plans against the real sandbox: its MCP servers for all 16 connectors, reached
 * through the MCP SDK client with a member's Bearer token, as the OAuth callback will.
 *
 * The sandbox runs as its own process (`services/sandbox/src/main.ts`), tokens come from its
 * token endpoint: services never import each other, test files included
 * (test/architecture/boundaries.test.ts), so the gateway cannot start it in-process.
 */

const repoRoot = fileURLToPath(new URL('../../../../../', import.meta.url));

/**
 * The ids each planned type holds in a freshly started sandbox
 * (services/sandbox/src/store/seed-data.ts), which a harvest must find exactly.
 */
const SEED_IDS: Record<string, Record<string, string[]>> = {
  github: {
    repositories: ['acme/api', 'acme/web', 'acme/infra'],
    teams: ['acme/platform', 'acme/security'],
    // Derived from repository owners and team organizations: the seed's `acme-labs` has
    // neither, so no tool reveals it (decision 008).
    organizations: ['acme'],
  },
  slack: { channels: ['C0001', 'C0002', 'C0003', 'C0004'], users: ['U0001', 'U0002', 'U0003'] },
  linear: { teams: ['team_eng', 'team_ops'], projects: ['proj_api_v2', 'proj_onboarding'] },
  stripe: { customers: ['cus_0001', 'cus_0002'], products: ['prod_0001', 'prod_0002'], subscriptions: ['sub_0001', 'sub_0002'] },
  huggingface: {
    models: ['acme/sentiment-small', 'acme/summarizer-base'],
    datasets: ['acme/support-tickets', 'acme/product-reviews'],
    spaces: ['acme/demo-chat', 'acme/leaderboard'],
  },
  sentry: { organizations: ['acme'], projects: ['acme/backend', 'acme/frontend'], teams: ['acme/platform', 'acme/mobile'] },
  supabase: { organizations: ['org_acme'], projects: ['prj_acme_prod', 'prj_acme_staging'], branches: ['br_develop', 'br_preview'] },
  cloudflare: {
    accounts: ['acc_acme'],
    workers: ['api-gateway', 'image-resizer'],
    kv_namespaces: ['kv_sessions', 'kv_flags'],
    r2_buckets: ['assets', 'backups'],
    d1_databases: ['d1_main', 'd1_analytics'],
  },
  pagerduty: { services: ['PSV0001', 'PSV0002'], teams: ['PTM0001', 'PTM0002'], schedules: ['PSC0001', 'PSC0002'], escalation_policies: ['PEP0001', 'PEP0002'] },
  notion: { pages: ['page_roadmap', 'page_oncall', 'page_holidays'] },
  atlassian: { sites: ['cloud_acme'], jira_projects: ['ENG', 'OPS'], confluence_spaces: ['space_eng', 'space_hr'] },
  gdrive: { files: ['file_roadmap', 'file_budget'] },
  gmail: { labels: ['INBOX', 'Label_1', 'Label_2'] },
  gcalendar: { calendars: ['primary', 'team@group.calendar.example'] },
  airtable: { workspaces: ['wspAcme'], bases: ['appSales', 'appHiring'], tables: ['appSales/tblDeals', 'appSales/tblContacts', 'appHiring/tblCandidates'] },
  vercel: { teams: ['team_acme'], projects: ['prj_web', 'prj_docs'] },
};

/** The member each token is for. On Hugging Face they are `acme`, the namespace the seed's repositories live in. */
const loginOf = (service: string) => (service === 'huggingface' ? 'acme' : 'alice');

let sandbox: ChildProcess;
let sandboxUrl: string;
let dataDir: string;
const clients = new Map<string, Client>();

async function startSandboxProcess(): Promise<void> {
  dataDir = mkdtempSync(join(tmpdir(), 'pc-harvest-'));
  sandbox = spawn(process.execPath, ['--import', 'tsx', 'services/sandbox/src/main.ts'], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'test', SANDBOX_PORT: '0', DATA_DIR: dataDir, PORTCULLIS_SECRET: randomBytes(32).toString('base64url') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  sandboxUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the sandbox did not start within 30 s:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /sandbox listening on (\S+)/.exec(output);
      if (match) { clearTimeout(timer); resolve(match[1]!); }
    };
    sandbox.stdout!.on('data', onData);
    sandbox.stderr!.on('data', onData);
    sandbox.once('exit', (code) => { clearTimeout(timer); reject(new Error(`the sandbox exited (${code}):\n${output}`)); });
  });
}

async function tokenFor(service: string): Promise<string> {
  const res = await fetch(`${sandboxUrl}/_sandbox/${service}/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ login: loginOf(service), name: 'Harvest Test' }),
  });
  if (!res.ok) throw new Error(`the sandbox token endpoint answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** `call` bound to an MCP client session of `service` holding a member's token, as the OAuth callback binds it. */
async function callerFor(service: string): Promise<ToolCaller> {
  let client = clients.get(service);
  if (!client) {
    client = new Client({ name: 'portcullis-harvest-test', version: '0.1.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${sandboxUrl}/${service}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${await tokenFor(service)}` } },
    });
    await client.connect(transport);
    clients.set(service, client);
  }
  const connected = client;
  return (tool, args) => connected.callTool({ name: tool, arguments: args }) as Promise<CallToolResult>;
}

const idsByType = (types: Record<string, Array<{ id: string }>>) =>
  Object.fromEntries(Object.entries(types).map(([type, records]) => [type, records.map((r) => r.id).sort()]));
const sorted = (expected: Record<string, string[]>) => Object.fromEntries(Object.entries(expected).map(([type, ids]) => [type, [...ids].sort()]));

beforeAll(async () => {
  await startSandboxProcess();
}, 60_000);

afterAll(async () => {
  await Promise.all([...clients.values()].map((c) => c.close().catch(() => undefined)));
  if (sandbox && sandbox.exitCode === null) {
    const exited = new Promise((resolve) => sandbox.once('exit', resolve));
    sandbox.kill('SIGTERM');
    await exited;
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('harvesting the sandbox', () => {
  it('covers every connector', () => {
    expect(Object.keys(SEED_IDS).sort()).toEqual(connectors.map((c) => c.key).sort());
    for (const [service, expected] of Object.entries(SEED_IDS)) {
      expect(Object.keys(expected).sort(), service).toEqual(harvestPlans[service]!.plans.filter((p) => !p.helper).map((p) => p.type).sort());
    }
  });

  it.each(Object.keys(SEED_IDS))('finds exactly the seeded entities of %s', async (service) => {
    const result = await harvestEntities(await callerFor(service), service);
    expect(result.failed).toEqual({});
    expect(result.partial).toEqual({});
    expect(idsByType(result.types)).toEqual(sorted(SEED_IDS[service]!));
    for (const records of Object.values(result.types)) {
      for (const record of records) {
        expect(record.name.length, `${service} ${record.id}`).toBeGreaterThan(0);
        for (const value of Object.values(record.attributes ?? {})) expect(['string', 'number', 'boolean']).toContain(typeof value);
      }
    }
  });

  it('keeps names and display attributes, and the parent of fanned-out records', async () => {
    const slack = await harvestEntities(await callerFor('slack'), 'slack');
    expect(slack.types.channels).toContainEqual({ id: 'C0004', name: 'incidents', attributes: { is_private: true, topic: 'Incident response' } });
    const airtable = await harvestEntities(await callerFor('airtable'), 'airtable');
    expect(airtable.types.tables).toContainEqual({ id: 'appSales/tblDeals', name: 'Deals', attributes: { baseId: 'appSales' } });
    const github = await harvestEntities(await callerFor('github'), 'github');
    expect(github.types.repositories).toContainEqual({
      id: 'acme/infra', name: 'infra', attributes: { owner: 'acme', private: true, default_branch: 'main', description: 'Deployment scripts' },
    });
  });

  it('sees what tool calls changed since the seed', async () => {
    const stripe = await callerFor('stripe');
    const created = await stripe('create_customer', { name: 'Carol Poe', email: 'carol@example.com' });
    expect(created.isError).toBeFalsy();
    const github = await callerFor('github');
    expect((await github('delete_repository', { owner: 'acme', repo: 'web' })).isError).toBeFalsy();

    const customers = (await harvestEntities(stripe, 'stripe')).types.customers!;
    expect(customers).toHaveLength(3);
    expect(customers.find((c) => c.name === 'Carol Poe')?.id).toMatch(/^customer_\d{4}$/);
    expect((await harvestEntities(github, 'github')).types.repositories!.map((r) => r.id).sort()).toEqual(['acme/api', 'acme/infra']);
  });
});

describe('a failing tool', () => {
  it('lands in `failed`, with the types that fan out over it, and the other types are kept', async () => {
    const supabase = await callerFor('supabase');
    const failing: ToolCaller = (tool, args) => (tool === 'list_projects' ? Promise.reject(new Error('upstream closed the connection')) : supabase(tool, args));
    const result = await harvestEntities(failing, 'supabase');
    expect(result.failed).toEqual({
      projects: 'upstream closed the connection',
      branches: 'needs projects, which failed: upstream closed the connection',
    });
    expect(idsByType(result.types)).toEqual({ organizations: ['org_acme'] });
  });

  it('answering an error result (here: a required argument missing) fails only its type', async () => {
    const linear = await callerFor('linear');
    const plan = harvestPlans.linear!;
    // A plan gone wrong: list_milestones needs `project`, which it is not given.
    const broken = { ...plan, plans: plan.plans.map((p) => (p.type === 'projects' ? { kind: 'tool' as const, type: 'projects', tool: 'list_milestones', recordsAt: 'items', id: first('id'), name: first('name') } : p)) };
    const result = await harvestEntities(linear, 'linear', { plan: broken });
    expect(result.failed.projects).toMatch(/^list_milestones answered an error: .*project/);
    expect(idsByType(result.types)).toEqual({ teams: ['team_eng', 'team_ops'] });
  });

  it('for one parent keeps the records of the others, marked partial', async () => {
    const airtable = await callerFor('airtable');
    const failing: ToolCaller = (tool, args) => (args.baseId === 'appHiring' ? Promise.reject(new Error('base appHiring: 503')) : airtable(tool, args));
    const result = await harvestEntities(failing, 'airtable');
    expect(result.failed).toEqual({});
    expect(result.types.tables!.map((t) => t.id).sort()).toEqual(['appSales/tblContacts', 'appSales/tblDeals']);
    expect(result.partial).toEqual({ tables: '1 of 2 calls failed: base appHiring: 503' });
  });
});
