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
 * (linear in the value's length).
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

/** Credential shapes, found anywhere inside a string value. */
const SECRET_VALUE = new RegExp([
  String.raw`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA)[A-Z0-9]{16}\b`, // aws-access-token
  String.raw`\bgh[pousr]_[A-Za-z0-9]{36,}`,                      // github-pat, github-oauth, github-app-token, github-refresh-token
  String.raw`\bgithub_pat_[A-Za-z0-9_]{82}`,                     // github-fine-grained-pat
  String.raw`\bglpat-[A-Za-z0-9_-]{20,}`,                        // gitlab-pat
  String.raw`\bxox[abposre]-[A-Za-z0-9-]{10,}`,                  // slack-bot-token, slack-user-token, slack-legacy-*
  String.raw`\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+`,                 // slack-app-token
  String.raw`hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,}`, // slack-webhook-url
  String.raw`\b(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}`,   // stripe-access-token
  String.raw`\bwhsec_[A-Za-z0-9+/=]{20,}`,                       // Stripe webhook signing secrets
  String.raw`\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}`,     // openai-api-key (project, service-account, admin)
  String.raw`\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}`,        // openai-api-key (legacy)
  String.raw`\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,}`,     // anthropic-api-key, anthropic-admin-api-key
  String.raw`\bAIza[A-Za-z0-9_-]{35}`,                           // gcp-api-key
  String.raw`\bhf_[A-Za-z]{34}`,                                 // huggingface-access-token
  String.raw`\blin_(?:api|oauth)_[A-Za-z0-9]{40}`,               // linear-api-key
  String.raw`\bnpm_[A-Za-z0-9]{36}`,                             // npm-access-token
  String.raw`\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}`,        // sendgrid-api-token
  String.raw`\bsntry[su]_[A-Za-z0-9_=+/-]{40,}`,                 // sentry-org-token, sentry-user-token
  String.raw`\bsbp_[a-f0-9]{40}`,                                // Supabase personal access tokens
  String.raw`\bpcm_[A-Za-z0-9_-]{43}`,                           // Portcullis member keys
  String.raw`\bey[A-Za-z0-9_-]{15,}\.ey[A-Za-z0-9_-]{15,}\.[A-Za-z0-9_-]{10,}`, // jwt
  String.raw`-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`, // private-key (PEM, OpenSSH, PGP)
  String.raw`\b(?:[Bb]earer|BEARER)\s+[A-Za-z0-9._~+/-]{16,}=*`,               // an Authorization header value
  String.raw`://[^/\s:@]{1,100}:[^/\s:@]{1,100}@`,               // credentials inside a URL
].join('|'));

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
