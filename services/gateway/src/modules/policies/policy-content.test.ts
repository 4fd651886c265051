import { describe, expect, it } from 'vitest';
import { catalogIssues, contentOf, fieldOfCompileError, principalIssues, slugOf, uniqueKey } from './policy-content.ts';

describe('slugOf', () => {
  it.each([
    ['Block deletes at night!', 'block-deletes-at-night'],
    ['  Édition  spéciale ', 'edition-speciale'],
    ['GitHub: read-only', 'github-read-only'],
    ['!!!', 'policy'],
    ['portcullis.base', 'portcullis-base'],
    ['a'.repeat(80), 'a'.repeat(60)],
  ])('%j → %j', (name, slug) => expect(slugOf(name)).toBe(slug));
});

describe('uniqueKey', () => {
  it('takes the base, else the first free numbered suffix', () => {
    expect(uniqueKey('x', new Set())).toBe('x');
    expect(uniqueKey('x', new Set(['x']))).toBe('x-2');
    expect(uniqueKey('x', new Set(['x', 'x-2', 'x-3']))).toBe('x-4');
  });
});

describe('catalogIssues', () => {
  it('names an unknown service, or each unknown tool by its index', () => {
    expect(catalogIssues({ service: 'nope', tools: ['x'] })).toEqual([{ field: 'service', message: expect.stringContaining('nope') }]);
    expect(catalogIssues({ service: 'github', tools: ['issue_write', 'launch_rockets', 'delete_repository', 'x'] }).map((i) => i.field)).toEqual(['tools.1', 'tools.3']);
    expect(catalogIssues({ service: 'github' })).toEqual([]);
  });
});

describe('principalIssues', () => {
  it('names each listed id that is not a member', () => {
    const known = new Set(['00000000-0000-4000-8000-000000000001']);
    expect(principalIssues({ principal: { type: 'all_members' } }, known)).toEqual([]);
    expect(principalIssues({ principal: { type: 'members', ids: ['00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002'] } }, known).map((i) => i.field)).toEqual(['principal.ids.1']);
  });
});

describe('contentOf', () => {
  it('orders tools as the catalog and tiers as read/write/destructive, drops repeats and blank messages', () => {
    const content = contentOf({
      name: 'n', service: 'github', effect: 'forbid', tools: ['delete_repository', 'issue_write', 'issue_write'], tiers: ['destructive', 'read', 'read'],
      principal: { type: 'members', ids: ['a', 'a', 'b'] }, denyMessage: '',
    }, 'k', true);
    const githubTools = ['issue_write', 'delete_repository'];
    expect(content).toEqual({
      policyKey: 'k', name: 'n', service: 'github', effect: 'forbid', tools: expect.arrayContaining(githubTools), tiers: ['read', 'destructive'],
      principal: { type: 'members', ids: ['a', 'b'] }, conditions: {}, denyMessage: null, enabled: true, mode: 'enforce',
    });
    expect(content.tools).toHaveLength(2);
    // Without a mode the default given applies (a new policy enforces; an update keeps the current mode).
    const base = { name: 'n', service: 'github', effect: 'forbid', principal: { type: 'all_members' } } as const;
    expect(contentOf(base, 'k', true, 'shadow').mode).toBe('shadow');
    expect(contentOf({ ...base, mode: 'enforce' }, 'k', true, 'shadow').mode).toBe('enforce');
    expect(contentOf({ name: 'n', service: 'github', effect: 'permit', principal: { type: 'all_members' }, enabled: false }, 'k', true).enabled).toBe(false);
  });
});

describe('fieldOfCompileError', () => {
  it.each([
    ['principal.ids must be a list of member ids', 'principal.ids'],
    ['policyKey must not be empty', 'policyKey'],
    ['conditions.args.0: unknown argument', 'conditions.args.0'],
    ['unknown tool "x" for service "github"', 'policy'],
    ['the policy names no tool of GitHub, so it never applies', 'policy'],
  ])('%j → %s', (error, field) => expect(fieldOfCompileError(error)).toBe(field));
});
