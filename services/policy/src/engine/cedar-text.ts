/**
 * Cedar source text for values that come from users (policy keys, member ids, tool names).
 *
 * JSON escaping is almost Cedar escaping, but not quite: Cedar has no `\b`, `\f` or
 * `\uXXXX` escapes (it writes `\u{…}`), so `JSON.stringify` alone produces text Cedar
 * refuses for control characters. Lone surrogates cannot be Cedar characters at all and
 * become U+FFFD.
 */

const JSON_ONLY_ESCAPES = /\\\\|\\u([0-9a-fA-F]{4})|\\b|\\f/g;

/** A Cedar string literal, quotes included, for any JavaScript string. */
export function cedarLiteral(value: string): string {
  return JSON.stringify(value).replace(JSON_ONLY_ESCAPES, (escape: string, hex: string | undefined) => {
    if (escape === '\\\\') return escape; // an escaped backslash, kept so a following "u" is not misread
    if (escape === '\\b') return '\\u{8}';
    if (escape === '\\f') return '\\u{c}';
    const code = Number.parseInt(hex!, 16);
    return code >= 0xd800 && code <= 0xdfff ? '\\u{fffd}' : `\\u{${code.toString(16)}}`;
  });
}

/** `Type::"id"` with the id written as a Cedar literal. */
export function entityUidText(type: string, id: string): string {
  return `${type}::${cedarLiteral(id)}`;
}
