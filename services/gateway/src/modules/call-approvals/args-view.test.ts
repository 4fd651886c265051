import { describe, expect, it } from 'vitest';
import { exactArgs, maskedArgs } from './args-view.ts';

/** Decision 067: the exact arguments in full, only secret-looking spans masked (and listed). */
const GHP = `ghp_${'Zq7Lm2Xv9Rt4'.repeat(3)}`;

describe('maskedArgs and exactArgs', () => {
  it('mask only the spans inside prose, at any depth, and list them at their paths', () => {
    const args = { owner: 'acme', comments: [{ body: `push with ${GHP} and AKIAIOSFODNN7EXAMPLF` }], plain: 'nothing here', n: 3 };
    const masked = maskedArgs(args);
    expect(masked.args).toEqual({ owner: 'acme', comments: [{ body: 'push with ghp_•••• and AKIA••••' }], plain: 'nothing here', n: 3 });
    expect(masked.secretSpans).toEqual([
      { path: ['comments', 0, 'body'], start: 10, end: 18, kind: 'github-token' },
      { path: ['comments', 0, 'body'], start: 23, end: 31, kind: 'aws-access-token' },
    ]);
    const text = (masked.args.comments as Array<{ body: string }>)[0]!.body;
    expect(masked.secretSpans.map((s) => text.slice(s.start, s.end))).toEqual(['ghp_••••', 'AKIA••••']);

    const exact = exactArgs(args);
    expect(exact.args).toEqual(args);
    const original = args.comments[0]!.body;
    expect(exact.secretSpans.map((s) => original.slice(s.start, s.end))).toEqual([GHP, 'AKIAIOSFODNN7EXAMPLF']);
  });

  it('a value under a secret-named key is a secret whole, strings and numbers alike', () => {
    const args = { password: 'hunter2', auth: { pin: 1234, user: 'olive' }, title: 'x' };
    const masked = maskedArgs(args);
    expect(masked.args).toEqual({ password: '••••', auth: { pin: '••••', user: '••••' }, title: 'x' });
    expect(masked.secretSpans.map((s) => [s.path, s.kind])).toEqual([[['password'], 'secret-name'], [['auth', 'pin'], 'secret-name'], [['auth', 'user'], 'secret-name']]);
    expect(JSON.stringify(masked)).not.toContain('hunter2');
    expect(JSON.stringify(masked)).not.toContain('1234');
    const exact = exactArgs(args);
    expect(exact.args).toEqual(args);
    expect(exact.secretSpans).toEqual([
      { path: ['password'], start: 0, end: 7, kind: 'secret-name' },
      { path: ['auth', 'pin'], start: 0, end: 4, kind: 'secret-name' },
      { path: ['auth', 'user'], start: 0, end: 5, kind: 'secret-name' },
    ]);
  });
});
