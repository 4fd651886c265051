import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { describe, expect, it } from 'vitest';
import { cedarLiteral, entityUidText } from './cedar-text.ts';

/** Parses `forbid(principal == Test::"<value>", …)` and reads the id back from Cedar's JSON. */
function roundTrip(value: string): string {
  const answer = cedar.policyToJson(`forbid (principal == ${entityUidText('Test::User', value)}, action, resource);`);
  if (answer.type !== 'success') throw new Error(answer.errors.map((e) => e.message).join('; '));
  const scope = answer.json.principal as { entity: { type: string; id: string } };
  return scope.entity.id;
}

describe('cedarLiteral', () => {
  it('is JSON escaping where JSON and Cedar agree', () => {
    expect(cedarLiteral('plain')).toBe('"plain"');
    expect(cedarLiteral('a"b\\c\nd\te')).toBe('"a\\"b\\\\c\\nd\\te"');
  });

  it('rewrites the escapes Cedar lacks', () => {
    expect(cedarLiteral('\u0001')).toBe('"\\u{1}"');
    expect(cedarLiteral('\b\f')).toBe('"\\u{8}\\u{c}"');
  });

  it('does not misread an escaped backslash followed by "u" as a unicode escape', () => {
    expect(cedarLiteral('\\u0041')).toBe('"\\\\u0041"');
  });

  it.each([
    ['quotes and backslashes', 'we"ird\\id'],
    ['control characters', 'a\u0000b\u0001c\u001fd\u007f'],
    ['backspace and form feed', 'x\by\fz'],
    ['line separators', 'a\u2028b\u2029c'],
    ['non-ASCII', 'héllo 世界 🚀'],
    ['a literal backslash-u sequence', '\\u0041\\u{41}'],
  ])('round-trips %s through Cedar unchanged', (_label, value) => {
    expect(roundTrip(value)).toBe(value);
  });

  it('replaces a lone surrogate, which no Cedar string can hold', () => {
    expect(roundTrip('a\ud800b')).toBe('a\ufffdb');
  });
});
