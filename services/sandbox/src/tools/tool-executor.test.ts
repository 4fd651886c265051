import { connectors, type CatalogTool, type ParamSpec } from '@portcullis/core';
import { describe, expect, it } from 'vitest';
import { createSandboxConnectors, type SandboxConnector } from '../sandbox-connector.ts';
import { ACTIVITY_COLLECTION, executeTool, type CallerIdentity, type ToolOutcome, type ToolResultBody } from './tool-executor.ts';

const alice: CallerIdentity = { login: 'alice', name: 'Alice Doe' };

function call(sandbox: SandboxConnector, tool: string, args: Record<string, unknown>, identity = alice): ToolOutcome {
  const plan = sandbox.plans.get(tool);
  if (!plan) throw new Error(`unknown tool ${tool}`);
  return executeTool(plan, sandbox.store, { connector: sandbox.connector.key, args, identity });
}

function body(outcome: ToolOutcome): ToolResultBody {
  if (outcome.isError) throw new Error(`expected a result, got the error "${outcome.message}"`);
  return outcome.body;
}

function fresh(service: string): SandboxConnector {
  return createSandboxConnectors().get(service)!;
}

const sample: Record<ParamSpec['type'], unknown> = { string: 'x', number: 1, boolean: true, array: ['x'], object: { x: 1 } };

function requiredArgumentsOf(tool: CatalogTool): Record<string, unknown> {
  return Object.fromEntries(Object.entries(tool.params).filter(([, spec]) => spec.required).map(([name, spec]) => [name, sample[spec.type]]));
}

describe('executeTool', () => {
  it('answers every catalog tool called with its required arguments', () => {
    const sandboxes = createSandboxConnectors();
    let answered = 0;
    for (const connector of connectors) {
      const sandbox = sandboxes.get(connector.key)!;
      for (const tool of connector.tools) {
        const args = requiredArgumentsOf(tool);
        const outcome = call(sandbox, tool.name, args);
        if (outcome.isError) {
          // Only a record named by the made-up arguments can be missing.
          expect(outcome.message, `${connector.key}/${tool.name}`).toMatch(/^No .+ found with /);
        } else {
          expect(outcome.body).toMatchObject({ connector: connector.key, tool: tool.name, identity: alice, arguments: args });
        }
        answered += 1;
      }
    }
    expect(answered).toBe(281);
  });

  it('reports every missing or mistyped argument and changes nothing', () => {
    const github = fresh('github');
    const outcome = call(github, 'create_branch', { owner: 'acme', repo: 7 });
    expect(outcome).toEqual({ isError: true, message: 'Invalid arguments for tool create_branch: missing required argument "branch"; argument "repo" must be a string' });
    expect([...github.store.records('branches')]).toEqual([]);
  });

  it('returns who called and the arguments as they arrived', () => {
    const args = { owner: 'acme', repo: 'api', title: 'Bug', labels: ['bug', 'p1'], issue_fields: [{ name: 'x', value: null }], method: 'create' };
    const result = body(call(fresh('github'), 'issue_write', args, { login: 'bob' }));
    expect(result.identity).toEqual({ login: 'bob' });
    expect(result.arguments).toEqual(args);
  });

  it('answers identity tools with the caller', () => {
    expect(body(call(fresh('github'), 'get_me', {})).item).toEqual({ id: 'alice', login: 'alice', name: 'Alice Doe' });
  });

  it('lists seeded records, filtered by fields and free text', () => {
    const github = fresh('github');
    expect(body(call(github, 'search_repositories', { query: 'org:acme' })).items!.map((r) => r.id)).toEqual(['acme/api', 'acme/web', 'acme/infra']);
    expect(body(call(github, 'search_repositories', { query: 'deployment', perPage: 5 })).items!.map((r) => r.id)).toEqual(['acme/infra']);
    expect(body(call(github, 'search_repositories', { query: 'org:acme', perPage: 2 })).items).toHaveLength(2);
    const vercel = fresh('vercel');
    expect(body(call(vercel, 'list_projects', { teamId: 'team_acme' })).items!.map((p) => p.id)).toEqual(['prj_web', 'prj_docs']);
    expect(body(call(vercel, 'list_projects', { teamId: 'team_other' })).items).toEqual([]);
  });

  it('reads one record by any identifying argument, and says when there is none', () => {
    const linear = fresh('linear');
    expect(body(call(linear, 'get_team', { query: 'ENG' })).item).toMatchObject({ id: 'team_eng' });
    expect(body(call(linear, 'get_team', { query: 'operations' })).item).toMatchObject({ id: 'team_ops' });
    expect(call(linear, 'get_team', { query: 'nope' })).toEqual({ isError: true, message: 'No team found with query="nope"' });
    const cloudflare = fresh('cloudflare');
    expect(body(call(cloudflare, 'workers_get_worker', { scriptName: 'api-gateway' })).item).toMatchObject({ id: 'api-gateway' });
  });

  it('keeps what a write created, with ids from one counter per connector', () => {
    const stripe = fresh('stripe');
    const created = body(call(stripe, 'create_customer', { name: 'Carol', email: 'carol@example.com' })).item!;
    expect(created).toMatchObject({ id: 'customer_0001', number: 1, name: 'Carol', email: 'carol@example.com', createdBy: 'alice' });
    expect(body(call(stripe, 'create_product', { name: 'Starter' })).item!.id).toBe('product_0002');
    const listed = body(call(stripe, 'list_customers', { email: 'carol@example.com' })).items;
    expect(listed).toEqual([created]);
  });

  it('creates the same ids in every fresh sandbox', () => {
    const ids = [fresh('linear'), fresh('linear')].map((linear) => body(call(linear, 'save_issue', { title: 'A', team: 'ENG' })).item!.id);
    expect(ids).toEqual(['issue_0001', 'issue_0001']);
  });

  it('updates by id with save_*, and refuses an id that does not exist', () => {
    const linear = fresh('linear');
    const issue = body(call(linear, 'save_issue', { title: 'Login fails', team: 'ENG' })).item!;
    const saved = body(call(linear, 'save_issue', { id: issue.id, team: 'OPS', priority: 1 }));
    expect(saved.operation).toBe('update');
    expect(saved.item).toMatchObject({ id: issue.id, title: 'Login fails', team: 'OPS', priority: 1, updatedBy: 'alice' });
    expect(body(call(linear, 'get_issue', { id: issue.id })).item).toEqual(saved.item);
    expect(call(linear, 'save_issue', { id: 'issue_9999', title: 'x' })).toEqual({ isError: true, message: 'No issue found with id="issue_9999"' });
  });

  it('marks a record with the status its verb implies', () => {
    const stripe = fresh('stripe');
    expect(body(call(stripe, 'cancel_subscription', { subscription: 'sub_0001' })).item).toMatchObject({ id: 'sub_0001', status: 'canceled' });
    expect(body(call(stripe, 'list_subscriptions', { status: 'active' })).items!.map((s) => s.id)).toEqual(['sub_0002']);
  });

  it('removes what a destructive tool deletes', () => {
    const github = fresh('github');
    const removed = body(call(github, 'delete_repository', { owner: 'acme', repo: 'infra' }));
    expect(removed).toMatchObject({ operation: 'remove', deleted: true, item: { id: 'acme/infra' } });
    expect(github.store.snapshot('repositories').map((r) => r.id)).toEqual(['acme/api', 'acme/web']);
    expect(call(github, 'delete_repository', { owner: 'acme', repo: 'infra' })).toEqual({ isError: true, message: 'No repository found with repo="infra"' });
  });

  it('shows records that point at the one read', () => {
    const slack = fresh('slack');
    const message = body(call(slack, 'slack_send_message', { channel_id: 'C0003', message: 'deploy done' })).item!;
    const read = body(call(slack, 'slack_read_channel', { channel_id: 'C0003' }));
    expect(read.item).toMatchObject({ id: 'C0003', name: 'engineering' });
    expect(read.related).toEqual({ messages: [message] });
    expect(body(call(slack, 'slack_read_channel', { channel_id: 'C0001' })).related).toBeUndefined();
  });

  it('keeps calls the sandbox models no data for as activity', () => {
    const supabase = fresh('supabase');
    const result = body(call(supabase, 'execute_sql', { project_id: 'prj_acme_prod', query: 'select 1' }));
    expect(result.operation).toBe('record');
    expect(result.item).toMatchObject({ tool: 'execute_sql', arguments: { project_id: 'prj_acme_prod', query: 'select 1' }, performedBy: 'alice' });
    expect(supabase.store.snapshot(ACTIVITY_COLLECTION)).toEqual([result.item]);
  });

  it('echoes reads the sandbox keeps no data for', () => {
    const result = body(call(fresh('github'), 'get_file_contents', { owner: 'acme', repo: 'api', path: 'README.md' }));
    expect(result.operation).toBe('echo');
    expect(result.result?.message).toContain('get_file_contents');
  });
});
