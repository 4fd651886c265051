import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { describe, expect, it } from 'vitest';
import {
  BUILTIN_POLICIES, compileAgentPolicySet, compilePolicy, compilePolicyParts, compilePolicyText, PolicyCompileError,
  readsOnlyPrincipalAndAction, renderPolicy, type CompiledPolicyParts, type PolicyRecordInput, type StoredPolicyRecord,
} from './compile.ts';
import { compilePreview } from './preview.ts';

const base: PolicyRecordInput = {
  policyKey: 'block-deletes',
  name: 'Block deletes',
  service: 'github',
  effect: 'forbid',
  tools: ['delete_repository', 'delete_file'],
  tiers: [],
  principal: { type: 'all_members' },
  denyMessage: 'No deletes',
};

function stored(record: Partial<StoredPolicyRecord> & { policyKey: string }): StoredPolicyRecord {
  return { ...base, id: `id-${record.policyKey}`, currentVersionId: null, enabled: true, ...record };
}

/** Cedar's own view of a policy's text. */
function cedarJson(text: string) {
  const answer = cedar.policyToJson(text);
  if (answer.type !== 'success') throw new Error(answer.errors.map((e) => e.message).join('; '));
  return answer.json;
}

describe('compilePolicy', () => {
  it('writes one forbid with its @id and the listed tools in catalog order', () => {
    const { cedar: text, errors, warnings } = compilePolicy(base);
    expect(errors).toEqual([]);
    expect(warnings).toEqual([]);
    expect(text).toBe([
      '@id("block-deletes")',
      'forbid (',
      '  principal,',
      '  action in [',
      '    GithubMCP::Action::"delete_file",',
      '    GithubMCP::Action::"delete_repository"',
      '  ],',
      '  resource',
      ');',
    ].join('\n'));
    expect(cedar.checkParsePolicySet({ staticPolicies: text }).type).toBe('success');
    expect(cedarJson(text).annotations).toEqual({ id: 'block-deletes' });
  });

  it('uses == for one tool and for one listed member, a when clause for several', () => {
    const one = compilePolicy({ ...base, tools: ['get_me'], principal: { type: 'members', ids: ['m1'] } }).cedar;
    expect(one).toContain('action == GithubMCP::Action::"get_me"');
    expect(one).toContain('principal == Portcullis::Member::"m1"');
    const several = compilePolicy({ ...base, principal: { type: 'members', ids: ['m1', 'm2', 'm1'] } }).cedar;
    expect(several).toContain('when { [Portcullis::Member::"m1", Portcullis::Member::"m2"].contains(principal) }');
    expect(cedar.checkParsePolicySet({ staticPolicies: several }).type).toBe('success');
  });

  it('expands tiers from the catalog and adds them to listed tools', () => {
    const text = compilePolicy({ ...base, tools: ['get_me'], tiers: ['destructive'] }).cedar;
    const actions = (cedarJson(text).action as { entities: Array<{ id: string }> }).entities.map((e) => e.id);
    expect(actions).toEqual(['get_me', 'delete_file', 'delete_repository', 'actions_run_trigger', 'label_write', 'projects_write']);
  });

  it('names every tool of the service when tools and tiers are both empty', () => {
    const text = compilePolicy({ ...base, service: 'gcalendar', tools: [], tiers: [] }).cedar;
    expect((cedarJson(text).action as { entities: unknown[] }).entities).toHaveLength(7);
  });

  it('writes permit policies too', () => {
    expect(compilePolicy({ ...base, effect: 'permit' }).cedar).toContain('\npermit (\n');
  });

  it('refuses what cannot be compiled, one error per problem', () => {
    const result = compilePolicy({
      ...base, policyKey: ' ', effect: 'allow' as never, service: 'nope', principal: { type: 'everyone' } as never,
    });
    expect(result.cedar).toBe('');
    expect(result.errors).toEqual([
      'policyKey must not be empty',
      'effect must be "forbid", "permit" or "require_approval", not "allow"',
      'unknown service "nope"',
      'principal must be {"type":"all_members"} or {"type":"members","ids":[…]}',
    ]);
  });

  it('keeps the built-in key prefix for built-in policies', () => {
    expect(compilePolicy({ ...base, policyKey: 'portcullis.base' }).errors).toEqual(['policyKey must not start with "portcullis." (reserved for built-in policies)']);
  });

  it('treats catalog mismatches as errors when authoring and as warnings when serving', () => {
    const record = { ...base, tools: ['delete_file', 'delete_everything'], tiers: ['dangerous'] };
    const authoring = compilePolicy(record, { mode: 'authoring' });
    expect(authoring.errors).toEqual(['unknown tool "delete_everything" for service "github"', 'unknown tier "dangerous" (tiers are read, write, destructive)']);
    const serving = compilePolicy(record, { mode: 'serving' });
    expect(serving.errors).toEqual([]);
    expect(serving.warnings).toEqual(authoring.errors);
    expect(serving.cedar).toContain('action == GithubMCP::Action::"delete_file"');
  });

  it('says so when a selection matches no tool, and never widens it to every tool', () => {
    const result = compilePolicy({ ...base, service: 'slack', tools: [], tiers: ['destructive'] }, { mode: 'serving' });
    expect(result.warnings).toEqual(['the policy names no tool of Slack, so it never applies']);
    expect(result.cedar).toContain('action in []');
    const nobody = compilePolicy({ ...base, principal: { type: 'members', ids: [] } }, { mode: 'serving' });
    expect(nobody.warnings).toEqual(['principal lists no members, so the policy never applies']);
    expect(nobody.cedar).toContain('when { false }');
  });

  it('refuses malformed conditions in both modes, naming each field (conditions.test.ts has the rest)', () => {
    for (const mode of ['authoring', 'serving'] as const) {
      const result = compilePolicy({ ...base, conditions: { timeWindow: { days: ['mon'], start: '09:00', end: '17:00', timeZone: 'Mars/Olympus' } } }, { mode });
      expect(result.cedar).toBe('');
      expect(result.errors).toEqual(['conditions.timeWindow.timeZone: must be an IANA time zone, e.g. Europe/Paris']);
    }
    expect(compilePolicy({ ...base, conditions: {} })).toEqual(compilePolicy(base));
  });
});

describe('compilePolicyText', () => {
  it('gives the text of a good record and throws PolicyCompileError for a bad one', () => {
    expect(compilePolicyText(base)).toBe(compilePolicy(base).cedar);
    expect(() => compilePolicyText({ ...base, tools: ['nope'] })).toThrow(PolicyCompileError);
    expect(() => compilePolicyText({ ...base, tools: ['nope'] })).toThrow('Policy "block-deletes" cannot be compiled: unknown tool "nope" for service "github"');
  });
});

describe('renderPolicy for one tool', () => {
  it('narrows the action scope to that tool and keeps everything else', () => {
    const { parts } = compilePolicyParts({ ...base, principal: { type: 'members', ids: ['a', 'b'] } }, 'serving');
    const narrowed = renderPolicy(parts!, 'delete_file');
    expect(narrowed).toContain('action == GithubMCP::Action::"delete_file"');
    expect(narrowed).toContain('.contains(principal)');
    expect(cedar.checkParsePolicySet({ staticPolicies: narrowed }).type).toBe('success');
  });
});

describe('readsOnlyPrincipalAndAction', () => {
  const parts = (overrides: Partial<CompiledPolicyParts>): CompiledPolicyParts => ({
    ...compilePolicyParts(base, 'serving').parts!, ...overrides,
  });

  it('is false as soon as a clause mentions context or resource, or the resource is constrained', () => {
    expect(readsOnlyPrincipalAndAction(parts({}))).toBe(true);
    expect(readsOnlyPrincipalAndAction(parts({ clauses: ['when { context.hour >= 22 }'] }))).toBe(false);
    expect(readsOnlyPrincipalAndAction(parts({ clauses: ['unless { resource in GithubMCP::Organization::"acme" }'] }))).toBe(false);
    expect(readsOnlyPrincipalAndAction(parts({ resourceScope: 'resource == GithubMCP::Repository::"a/b"' }))).toBe(false);
  });

  it("agrees with Cedar's own AST for what the compiler produces, and the built-ins read neither", () => {
    const records: PolicyRecordInput[] = [
      base,
      { ...base, principal: { type: 'members', ids: ['context', 'resource'] } },
      { ...base, principal: { type: 'members', ids: ['one'] }, tiers: ['read'] },
      { ...base, principal: { type: 'members', ids: [] } },
    ];
    const texts = [...Object.values(BUILTIN_POLICIES), ...records.map((r) => renderPolicy(compilePolicyParts(r, 'serving').parts!))];
    for (const text of texts) {
      const json = cedarJson(text);
      const ast = JSON.stringify(json.conditions);
      expect(json.resource, text).toEqual({ op: 'All' });
      expect(ast, text).not.toContain('"Var":"context"');
      expect(ast, text).not.toContain('"Var":"resource"');
    }
    // Member ids that are those words only make the check conservative.
    expect(readsOnlyPrincipalAndAction(compilePolicyParts(records[1]!, 'serving').parts!)).toBe(false);
    expect(readsOnlyPrincipalAndAction(compilePolicyParts(records[2]!, 'serving').parts!)).toBe(true);
  });
});

describe('compileAgentPolicySet', () => {
  it('indexes enabled records by the actions they name, in key order, and skips disabled ones', () => {
    const source = compileAgentPolicySet([
      stored({ policyKey: 'b', tools: ['delete_file'] }),
      stored({ policyKey: 'a', tools: ['delete_file', 'get_me'] }),
      stored({ policyKey: 'off', tools: ['delete_file'], enabled: false }),
    ]);
    expect(source.errors).toEqual([]);
    expect(source.partsByAction.get('GithubMCP::Action::"delete_file"')!.map((p) => p.policyKey)).toEqual(['a', 'b']);
    expect(source.partsByAction.get('GithubMCP::Action::"get_me"')!.map((p) => p.policyKey)).toEqual(['a']);
    expect([...source.policies.keys()]).toEqual(['portcullis.base', 'portcullis.member-not-approved', 'a', 'b']);
    expect(source.policies.get('a')).toMatchObject({ policyId: 'id-a', versionId: '', builtIn: false });
  });

  it('reports each record that cannot be compiled, naming it', () => {
    const source = compileAgentPolicySet([stored({ policyKey: 'bad', name: 'Bad one', service: 'nope' }), stored({ policyKey: 'portcullis.base', name: 'Sneaky' })]);
    expect(source.errors).toEqual([
      'Policy "Bad one" cannot be compiled: unknown service "nope"',
      'Policy "Sneaky" cannot be compiled: policyKey must not start with "portcullis." (reserved for built-in policies)',
    ]);
  });

  it('refuses the same key twice', () => {
    const source = compileAgentPolicySet([stored({ policyKey: 'dup', name: 'One' }), stored({ policyKey: 'dup', name: 'Two', id: 'other' })]);
    expect(source.errors).toEqual(['Policy "Two": policy key "dup" is used twice']);
  });
});

describe('compilePreview', () => {
  const draft = { name: 'No Slack writes', service: 'slack', effect: 'forbid', tiers: ['write'], principal: { type: 'all_members' } };

  it('compiles a draft, keyed "draft" until it has a key', () => {
    const preview = compilePreview(draft);
    expect(preview.errors).toEqual([]);
    expect(preview.cedar.startsWith('@id("draft")\nforbid (')).toBe(true);
    expect(compilePreview({ ...draft, policyKey: 'mine' }).cedar.startsWith('@id("mine")')).toBe(true);
  });

  it('names each field that is wrong, unknown fields included', () => {
    const preview = compilePreview({ ...draft, effect: 'maybe', denyMesage: 'typo', principal: { type: 'members' } });
    expect(preview.cedar).toBe('');
    expect(preview.errors).toHaveLength(3);
    expect(preview.errors.some((e) => e.startsWith('effect:'))).toBe(true);
    expect(preview.errors.some((e) => e.startsWith('principal.ids:'))).toBe(true);
    expect(preview.errors.some((e) => e.includes('denyMesage'))).toBe(true);
  });

  it('refuses what is not an object at all', () => {
    expect(compilePreview(null).errors).toEqual(['draft: Invalid input: expected object, received null']);
  });
});
