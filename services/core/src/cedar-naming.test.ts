import { describe, expect, it } from 'vitest';
import { actionUid, cedarNamespace, principalUid, resourceOf } from './cedar-naming.ts';

describe('cedar naming', () => {
  it('names namespaces, actions and principals as DESIGN.md fixes them', () => {
    expect(cedarNamespace('github')).toBe('GithubMCP');
    expect(actionUid('github', 'create_issue')).toBe('GithubMCP::Action::"create_issue"');
    expect(principalUid('7d0c')).toBe('Portcullis::Member::"7d0c"');
  });

  it('reads the targeted entity from arguments, else falls back to the service', () => {
    expect(resourceOf('github', { owner: 'acme', repo: 'api' }).uid).toBe('GithubMCP::Repository::"acme/api"');
    expect(resourceOf('slack', { channel_id: 'C123' }).uid).toBe('SlackMCP::Channel::"C123"');
    expect(resourceOf('github', { query: 'x' }).uid).toBe('GithubMCP::Service::"github"');
    expect(resourceOf('github', { owner: 'a"b', repo: 'c' }).uid).toBe('GithubMCP::Repository::"a\\"b/c"');
  });
});
