import { findSecretSpans, isSecretKey } from '@portcullis/core';

/** What a masked secret span reads as, after the credential's public prefix: `ghp_••••`. */
export const SECRET_MASK = '••••';

/** Deeper than this, a value is treated as a secret whole (as audit redaction does, decision 029). */
const MAX_DEPTH = 32;

/** Where a value sits in the arguments: keys and array indexes from the top. */
export type ArgPath = Array<string | number>;

/**
 * A secret-looking stretch of one string value of the arguments (decision 067): `[start, end)`
 * in the string at `path` as answered (in a masked view, the mask with its shown prefix), and
 * the rule that found it (`github-token`, …, or `secret-name` for a value under a key that names
 * a secret, such as `password`). For a non-string value secret as a whole, the span covers its
 * JSON text.
 */
export interface ArgSecretSpan { path: ArgPath; start: number; end: number; kind: string }

/** Arguments as the approval page shows them, with their secret-looking spans. */
export interface ArgsView { args: Record<string, unknown>; secretSpans: ArgSecretSpan[] }

/**
 * The arguments in full, every secret-looking span listed; with `mask`, each span's characters
 * after its public prefix are replaced by `••••` (its length not told), and a non-string value
 * under a secret-named key becomes the string `••••`. Nothing else changes: the prose around a
 * credential is shown as sent.
 */
function viewOf(args: Record<string, unknown>, mask: boolean): ArgsView {
  const secretSpans: ArgSecretSpan[] = [];

  const text = (value: string, path: ArgPath, whole: boolean): string => {
    const spans = whole ? [{ start: 0, end: value.length, kind: 'secret-name', shown: 0 }] : findSecretSpans(value);
    if (!mask) {
      for (const s of spans) secretSpans.push({ path, start: s.start, end: s.end, kind: s.kind });
      return value;
    }
    let out = '';
    let from = 0;
    for (const s of spans) {
      out += value.slice(from, s.start);
      const start = out.length;
      out += value.slice(s.start, s.start + s.shown) + SECRET_MASK;
      secretSpans.push({ path, start, end: out.length, kind: s.kind });
      from = s.end;
    }
    return out + value.slice(from);
  };

  const walk = (value: unknown, path: ArgPath, whole: boolean): unknown => {
    if (typeof value === 'string') return text(value, path, whole);
    const tooDeep = path.length > MAX_DEPTH;
    if (Array.isArray(value) && !tooDeep) return value.map((v, i) => walk(v, [...path, i], whole));
    if (value !== null && typeof value === 'object' && !tooDeep) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = walk(v, [...path, k], whole || isSecretKey(k));
      return out;
    }
    if (!(whole || tooDeep) || value === null) return value;
    // A number, boolean or too-deep structure that is a secret as a whole: its span covers its JSON text.
    const shown = mask ? SECRET_MASK : value;
    secretSpans.push({ path, start: 0, end: mask ? SECRET_MASK.length : (JSON.stringify(value) ?? '').length, kind: 'secret-name' });
    return shown;
  };

  return { args: walk(args, [], false) as Record<string, unknown>, secretSpans };
}

/** What the list and get answers carry: the exact arguments with each secret-looking span masked. */
export const maskedArgs = (args: Record<string, unknown>): ArgsView => viewOf(args, true);

/** What the reveal answer carries: the exact arguments, the same spans at their places in them. */
export const exactArgs = (args: Record<string, unknown>): ArgsView => viewOf(args, false);
