import { describe, expect, it } from 'vitest';
import { LinearPattern, PATTERN_CALL_BUDGET, PATTERN_PROGRAM_MAX, PATTERN_TEXT_MAX, PatternRun, type PatternCompilation } from './patterns.ts';
import { policyConditionsSchema, storedPolicyConditionsSchema } from './policy-conditions.ts';

const compiled = (source: string): LinearPattern => {
  const result: PatternCompilation = LinearPattern.compile(source);
  if (!result.ok) throw new Error(result.problem);
  return result.pattern;
};

describe('LinearPattern', () => {
  it('answers a catastrophic pattern on a long text (a backtracking engine takes exponential time here)', () => {
    const pattern = compiled('^(a+)+$');
    const run = new PatternRun();
    expect(pattern.matches(`${'a'.repeat(4_000)}!`, run)).toBe(false);
    expect(pattern.matches('a'.repeat(30), run)).toBe(true);
  });

  it('matches anywhere in the text, as RegExp.test does; code points, not halves of them', () => {
    const run = new PatternRun();
    expect(compiled('release/').matches('refs/release/1.2', run)).toBe(true);
    expect(compiled('^release/').matches('refs/release/1.2', run)).toBe(false);
    expect(compiled('^.$').matches('😀', run)).toBe(true);
    expect(compiled('(?i)drop\\s+table').matches('select 1; DROP  TABLE users', run)).toBe(true);
  });

  it.each([
    ['a backreference', '(a)\\1', /invalid escape sequence: `\\1`/],
    ['a lookahead', 'foo(?=bar)', /unsupported Perl syntax: `\(\?=`/],
    ['a negative lookahead', '^(?!main$)', /unsupported Perl syntax: `\(\?!`/],
    ['a lookbehind', '(?<=a)b', /invalid named capture/],
    ['an unclosed class', '([a-z', /missing closing \]/],
  ])('refuses %s, saying what RE2 cannot do', (_label, source, detail) => {
    const result = LinearPattern.compile(source);
    expect(result.ok).toBe(false);
    const { problem } = result as { problem: string };
    expect(problem).toMatch(/^must be a valid regular expression in RE2 syntax \(no backreferences or lookaround\): /);
    expect(problem).toMatch(detail);
  });

  it(`refuses a pattern that compiles to more than ${PATTERN_PROGRAM_MAX} instructions`, () => {
    expect(LinearPattern.compile('[a-z]{1,100}').ok).toBe(true);
    const result = LinearPattern.compile('[a-z]{1000}x');
    expect(result).toEqual({ ok: false, problem: expect.stringMatching(/^is too complex: it compiles to \d+ RE2 instructions, at most 500 are allowed/) });
  });
});

describe('PatternRun', () => {
  it(`does not run a pattern on a text longer than ${PATTERN_TEXT_MAX} characters`, () => {
    const pattern = compiled('a');
    expect(pattern.matches('a'.repeat(PATTERN_TEXT_MAX), new PatternRun())).toBe(true);
    expect(pattern.matches('a'.repeat(PATTERN_TEXT_MAX + 1), new PatternRun())).toBeUndefined();
  });

  it('stops running the patterns of one call once their work exceeds the budget', () => {
    const pattern = compiled('[a-z]{1,100}$'); // about 200 instructions
    const text = 'a'.repeat(1_000);
    const run = new PatternRun();
    const runs = Math.floor(PATTERN_CALL_BUDGET / (pattern.size * text.length));
    expect(runs).toBeGreaterThan(0);
    for (let i = 0; i < runs; i++) expect(pattern.matches(text, run)).toBe(true);
    expect(pattern.matches(text, run)).toBeUndefined();
    // A short text still fits in what is left; a fresh call has its whole budget.
    expect(pattern.matches('abc', run)).toBe(true);
    expect(pattern.matches(text, new PatternRun())).toBe(true);
  });
});

describe('policyConditionsSchema', () => {
  it('refuses a pattern RE2 cannot run, naming the field; the stored shape still reads it', () => {
    const conditions = { args: [{ path: 'branch', op: 'regex', pattern: '^(?!main$)' }] };
    const parsed = policyConditionsSchema.safeParse(conditions);
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['args.0.pattern', expect.stringMatching(/^must be a valid regular expression in RE2 syntax/)],
    ]);
    expect(storedPolicyConditionsSchema.parse(conditions)).toEqual(conditions);
  });
});
