/** Keys whose values are never written to the audit log. */
const SECRET_KEY = /(pass(word|wd|phrase)?|secret|token|authori[sz]ation|api[-_]?key|apikey|private[-_]?key|credential|cookie|session[-_]?key|client[-_]?secret)/i;
/** Values that look like credentials whatever key they sit under. */
const SECRET_VALUE = [
  /^(pcm|sk|pk|rk)_(live_|test_)?[A-Za-z0-9_-]{16,}$/, // member keys, Stripe-style keys
  /^gh[pousr]_[A-Za-z0-9]{20,}$/,                       // GitHub tokens
  /^xox[abposr]-[A-Za-z0-9-]{10,}$/,                    // Slack tokens
  /^hf_[A-Za-z0-9]{20,}$/,                              // Hugging Face tokens
  /^(lin_api|lin_oauth)_[A-Za-z0-9]{20,}$/,             // Linear keys
  /^Bearer\s+\S{8,}$/i,
  /^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}$/, // JWTs
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
];

export const REDACTED = '[REDACTED]';

/** A deep copy of tool arguments with secret-looking keys and values replaced by `[REDACTED]`. */
export function redactToolArgs(args: Record<string, unknown>): Record<string, unknown> {
  return redactValue(args, 0) as Record<string, unknown>;
}

function redactValue(value: unknown, depth: number): unknown {
  if (depth > 32) return REDACTED;
  if (typeof value === 'string') return SECRET_VALUE.some((re) => re.test(value)) ? REDACTED : value;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? REDACTED : redactValue(v, depth + 1);
    return out;
  }
  return value;
}
