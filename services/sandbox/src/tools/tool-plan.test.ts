import { connectors, getConnector } from '@portcullis/core';
import { describe, expect, it } from 'vitest';
import { operationOfCall, planConnectorTools, type ToolPlan } from './tool-plan.ts';
import { collectionNameOf, memberNameOf, singularOf, wordsOf } from './words.ts';

function planOf(service: string, tool: string): ToolPlan {
  const plan = planConnectorTools(getConnector(service)!).get(tool);
  if (!plan) throw new Error(`no plan for ${service}/${tool}`);
  return plan;
}

describe('tool names', () => {
  it('split into words in every naming style of the catalog', () => {
    expect(wordsOf('getJiraIssue')).toEqual(['get', 'jira', 'issue']);
    expect(wordsOf('notion-create-pages')).toEqual(['notion', 'create', 'pages']);
    expect(wordsOf('kv_namespace_create')).toEqual(['kv', 'namespace', 'create']);
  });

  it('name collections in the plural and members in the singular', () => {
    expect(collectionNameOf(['pull', 'requests'])).toBe('pull_requests');
    expect(collectionNameOf(['escalation', 'policy'])).toBe('escalation_policies');
    expect(collectionNameOf(['canvas'])).toBe('canvases');
    expect(memberNameOf('kv_namespaces')).toBe('kv_namespace');
    expect(memberNameOf('branches')).toBe('branch');
    expect(singularOf('status')).toBe('status');
    expect(singularOf('databases')).toBe('database');
  });
});

describe('tool plans', () => {
  it('cover every tool of the catalog, read tools never writing', () => {
    let planned = 0;
    for (const connector of connectors) {
      const plans = planConnectorTools(connector);
      expect([...plans.keys()]).toEqual(connector.tools.map((t) => t.name));
      for (const plan of plans.values()) {
        planned += 1;
        if (plan.tool.tier === 'read') expect(['identity', 'list', 'get', 'echo'], plan.tool.name).toContain(plan.operation);
        else expect(['create', 'upsert', 'update', 'remove', 'record'], plan.tool.name).toContain(plan.operation);
      }
    }
    expect(planned).toBe(281);
  });

  it.each([
    ['github', 'get_me', 'identity', ''],
    ['github', 'search_repositories', 'list', 'repositories'],
    ['github', 'create_repository', 'create', 'repositories'],
    ['github', 'delete_repository', 'remove', 'repositories'],
    ['github', 'issue_read', 'get', 'issues'],
    ['github', 'get_file_contents', 'echo', ''],
    ['slack', 'slack_read_channel', 'get', 'channels'],
    ['slack', 'slack_send_message', 'create', 'messages'],
    ['slack', 'slack_read_canvas', 'get', 'canvases'],
    ['linear', 'save_issue', 'upsert', 'issues'],
    ['linear', 'get_team', 'get', 'teams'],
    ['stripe', 'cancel_subscription', 'update', 'subscriptions'],
    ['stripe', 'update_dispute', 'record', ''],
    ['cloudflare', 'kv_namespace_delete', 'remove', 'kv_namespaces'],
    ['cloudflare', 'workers_get_worker', 'get', 'workers'],
    ['pagerduty', 'create_schedule_override', 'create', 'schedule_overrides'],
    ['atlassian', 'getVisibleJiraProjects', 'list', 'jira_projects'],
    ['atlassian', 'getAccessibleAtlassianResources', 'list', 'sites'],
    ['notion', 'notion-fetch', 'get', 'pages'],
    ['gdrive', 'get_file_metadata', 'get', 'files'],
    ['airtable', 'list_tables_for_base', 'list', 'tables'],
    ['sentry', 'remove_team_from_project', 'record', ''],
    ['vercel', 'deploy_to_vercel', 'record', ''],
  ])('%s/%s → %s %s', (service, tool, operation, collection) => {
    const plan = planOf(service, tool);
    expect(plan.operation).toBe(operation);
    expect(plan.collection).toBe(collection);
  });

  it('sets the status an update verb implies', () => {
    expect(planOf('stripe', 'cancel_subscription').status).toBe('canceled');
    expect(planOf('supabase', 'pause_project').status).toBe('paused');
    expect(planOf('github', 'update_pull_request').status).toBeUndefined();
  });

  it('lets a method argument choose the operation per call', () => {
    const issueWrite = planOf('github', 'issue_write');
    expect(issueWrite.operationArgument).toBe('method');
    expect(operationOfCall(issueWrite, { method: 'create' })).toBe('create');
    expect(operationOfCall(issueWrite, { method: 'update' })).toBe('update');
    const labelWrite = planOf('github', 'label_write');
    expect(operationOfCall(labelWrite, { method: 'delete' })).toBe('remove');
    expect(operationOfCall(planOf('github', 'actions_run_trigger'), { method: 'run_workflow' })).toBe('record');
  });
});
