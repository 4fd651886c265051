/**
 * Redaction of tool arguments before they leave the gateway (audit entries, the live stream,
 * simulate). Two independent nets: the argument's key, split into words, names a secret; or the
 * value carries a credential of a known shape anywhere inside it. Either one replaces the whole
 * value with `[REDACTED]`, so a secret embedded in prose ("use ghp_… to push") goes too.
 *
 * The value shapes follow the context-free, prefix-anchored rules of gitleaks' default rule set
 * (`config/gitleaks.toml`; rule ids in the comments). secretlint's recommended preset was measured
 * instead (decision 029): 0.23 ms per call on the hot path and it missed AWS key ids, JWTs and
 * PEM blocks, so the list lives here, in one regular expression without nested quantifiers
 * (linear in the value's length). `findSecretSpans` finds the same shapes as spans, for views
 * that show a value in full with only its credentials masked (call approvals, decision 067).
 */

/**
 * Words that make a key secret when they appear in it: `authToken`, `x-api-key`, `user_pwd`,
 * `sessionId`, `pin` are all caught; `author`, `spinner`, `pinned` are not (whole words only).
 */
const SECRET_WORDS = new Set([
  'auth', 'authorization', 'authorisation', 'bearer', 'cookie', 'credential', 'credentials',
  'cvc', 'cvv', 'jwt', 'otp', 'passcode', 'passphrase', 'passwd', 'password', 'pin', 'pwd',
  'secret', 'secrets', 'session', 'sig', 'signature', 'ssn', 'token', 'tokens', 'totp',
  'apikey', 'privatekey', 'accesskey', 'clientsecret', 'pass',
]);
/** Word endings that name a secret in keys written as one word (`accesstoken`, `dbpassword`, `APITOKEN`). */
const SECRET_SUFFIXES = ['token', 'tokens', 'password', 'passwd', 'secret', 'secrets'];
/** Adjacent word pairs that name a secret although neither word alone does (`api_key`, `privateKey`). */
const SECRET_WORD_PAIRS = new Set(['api key', 'private key', 'access key', 'secret key', 'signing key', 'encryption key', 'master key']);

/**
 * Credential shapes, found anywhere inside a string value: the gitleaks rule id (or our name
 * for it), the pattern, and the credential's public prefix (`ghp_`, `AKIA`, `Bearer `) that a
 * masked view may keep showing.
 */
const SECRET_RULES: ReadonlyArray<{ kind: string; pattern: string; shown?: RegExp }> = [
  { kind: 'aws-access-token', pattern: String.raw`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA)[A-Z0-9]{16}\b`, shown: /^[A-Z0-9]{4}/ },
  // github-pat, github-oauth, github-app-token, github-refresh-token
  { kind: 'github-token', pattern: String.raw`\bgh[pousr]_[A-Za-z0-9]{36,}`, shown: /^gh[pousr]_/ },
  { kind: 'github-fine-grained-pat', pattern: String.raw`\bgithub_pat_[A-Za-z0-9_]{82}`, shown: /^github_pat_/ },
  { kind: 'gitlab-pat', pattern: String.raw`\bglpat-[A-Za-z0-9_-]{20,}`, shown: /^glpat-/ },
  // slack-bot-token, slack-user-token, slack-legacy-*
  { kind: 'slack-token', pattern: String.raw`\bxox[abposre]-[A-Za-z0-9-]{10,}`, shown: /^xox[abposre]-/ },
  { kind: 'slack-app-token', pattern: String.raw`\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+`, shown: /^xapp-/ },
  { kind: 'slack-webhook-url', pattern: String.raw`hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,}`, shown: /^hooks\.slack\.com\/[a-z]+\// },
  { kind: 'stripe-access-token', pattern: String.raw`\b(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}`, shown: /^(?:sk|rk)_[a-z]+_/ },
  { kind: 'stripe-webhook-secret', pattern: String.raw`\bwhsec_[A-Za-z0-9+/=]{20,}`, shown: /^whsec_/ },
  // openai-api-key (project, service-account, admin)
  { kind: 'openai-api-key', pattern: String.raw`\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}`, shown: /^sk-[a-z]+-/ },
  { kind: 'openai-api-key', pattern: String.raw`\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}`, shown: /^sk-/ }, // legacy
  // anthropic-api-key, anthropic-admin-api-key
  { kind: 'anthropic-api-key', pattern: String.raw`\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,}`, shown: /^sk-ant-[a-z]+\d{2}-/ },
  { kind: 'gcp-api-key', pattern: String.raw`\bAIza[A-Za-z0-9_-]{35}`, shown: /^AIza/ },
  { kind: 'huggingface-access-token', pattern: String.raw`\bhf_[A-Za-z]{34}`, shown: /^hf_/ },
  { kind: 'linear-api-key', pattern: String.raw`\blin_(?:api|oauth)_[A-Za-z0-9]{40}`, shown: /^lin_[a-z]+_/ },
  { kind: 'npm-access-token', pattern: String.raw`\bnpm_[A-Za-z0-9]{36}`, shown: /^npm_/ },
  { kind: 'sendgrid-api-token', pattern: String.raw`\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}`, shown: /^SG\./ },
  // sentry-org-token, sentry-user-token
  { kind: 'sentry-token', pattern: String.raw`\bsntry[su]_[A-Za-z0-9_=+/-]{40,}`, shown: /^sntry[su]_/ },
  { kind: 'supabase-token', pattern: String.raw`\bsbp_[a-f0-9]{40}`, shown: /^sbp_/ }, // Supabase personal access tokens
  { kind: 'portcullis-member-key', pattern: String.raw`\bpcm_[A-Za-z0-9_-]{43}`, shown: /^pcm_/ },
  { kind: 'jwt', pattern: String.raw`\bey[A-Za-z0-9_-]{15,}\.ey[A-Za-z0-9_-]{15,}\.[A-Za-z0-9_-]{10,}` },
  // private-key (PEM, OpenSSH, PGP): the header is matched; a span runs on to its END line.
  { kind: 'private-key', pattern: String.raw`-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----` },
  // an Authorization header value
  { kind: 'authorization-header', pattern: String.raw`\b(?:[Bb]earer|BEARER)\s+[A-Za-z0-9._~+/-]{16,}=*`, shown: /^[A-Za-z]+\s+/ },
  // credentials inside a URL: the span is `user:password`, between `://` and `@`
  { kind: 'url-credentials', pattern: String.raw`://[^/\s:@]{1,100}:[^/\s:@]{1,100}@` },
];

/** Every rule as one alternation (bounded, non-nested quantifiers: linear in the value's length). */
const SECRET_VALUE = new RegExp(SECRET_RULES.map((r) => r.pattern).join('|'));
/** The same, one named group per rule (`r0`, `r1`, …) to tell which one matched, for `findSecretSpans`. */
const SECRET_VALUE_SPANS = new RegExp(SECRET_RULES.map((r, i) => `(?<r${i}>${r.pattern})`).join('|'), 'g');
/** How a PEM block ends: its END line (searched for from the header on, so still linear). */
const PRIVATE_KEY_END = /-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----/g;

/** A credential-shaped stretch of a string: `[start, end)`, the rule's `kind`, and how many leading characters are its public prefix. */
export interface SecretSpan {
  start: number;
  end: number;
  kind: string;
  /** Length of the span's public prefix (`ghp_`, `AKIA`, `Bearer `, a PEM header), which a masked view may keep. */
  shown: number;
}

/**
 * The credential-shaped spans of `value`, in order and not overlapping (the same rules as
 * `looksLikeCredential`): what a masked view hides, instead of hiding the whole value.
 */
export function findSecretSpans(value: string): SecretSpan[] {
  const spans: SecretSpan[] = [];
  const pattern = new RegExp(SECRET_VALUE_SPANS);
  for (let match = pattern.exec(value); match; match = pattern.exec(value)) {
    const index = Number(Object.entries(match.groups ?? {}).find(([, text]) => text !== undefined)![0].slice(1));
    const rule = SECRET_RULES[index]!;
    let start = match.index;
    let end = start + match[0].length;
    if (rule.kind === 'url-credentials') { start += 3; end -= 1; }
    if (rule.kind === 'private-key') {
      PRIVATE_KEY_END.lastIndex = end;
      const closing = PRIVATE_KEY_END.exec(value);
      end = closing ? closing.index + closing[0].length : value.length;
      pattern.lastIndex = end;
    }
    const shown = rule.kind === 'private-key' ? match[0].length : (rule.shown?.exec(value.slice(start, end))?.[0].length ?? 0);
    spans.push({ start, end, kind: rule.kind, shown: Math.min(shown, end - start) });
  }
  return spans;
}

export const REDACTED = '[REDACTED]';

/** A deep copy of tool arguments with secret-named keys and credential-shaped values replaced by `[REDACTED]`. */
export function redactToolArgs(args: Record<string, unknown>): Record<string, unknown> {
  return redactValue(args, 0) as Record<string, unknown>;
}

/** Whether an argument named `key` holds a secret, judged by the words of its name. */
export function isSecretKey(key: string): boolean {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  for (let i = 0; i < words.length; i++) {
    if (SECRET_WORDS.has(words[i]!) || SECRET_SUFFIXES.some((suffix) => words[i]!.endsWith(suffix))) return true;
    if (i > 0 && SECRET_WORD_PAIRS.has(`${words[i - 1]} ${words[i]}`)) return true;
  }
  return false;
}

/** Whether a string carries a credential of a known shape anywhere in it. */
export function looksLikeCredential(value: string): boolean {
  return SECRET_VALUE.test(value);
}

function redactValue(value: unknown, depth: number): unknown {
  if (depth > 32) return REDACTED;
  if (typeof value === 'string') return looksLikeCredential(value) ? REDACTED : value;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = isSecretKey(k) ? REDACTED : redactValue(v, depth + 1);
    return out;
  }
  return value;
}
