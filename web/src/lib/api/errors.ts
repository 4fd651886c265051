/**
 * Readable sentences for whatever a call threw (decision 041): the API's validation text
 * (`Invalid body field "code": Too small: …`) becomes "Code must not be empty.", an unknown route
 * or a note naming an API path never reaches the reader, and MFA and session states say what to
 * do next. Pages show `messageOf(err)` and put `fieldErrorsOf(err)` beside their fields.
 */
import { ApiError } from './api-error.ts';

/** `conditions.timeWindow.timeZone` → `Time zone`; `clientId` → `Client ID`. */
export function fieldLabel(field: string): string {
  const last = field.split('.').filter((part) => !/^\d+$/.test(part)).pop() ?? field;
  const words = last.replace(/([a-z0-9])([A-Z])/g, '$1 $2').replace(/[_-]+/g, ' ').toLowerCase().replace(/\bid\b/g, 'ID').replace(/\burl\b/g, 'URL');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * A validation message as the end of a sentence about the field ("must not be empty"). The
 * route schemas' own messages already read that way ("must be a UUID"); zod's defaults do not.
 */
export function issueText(message: string): string {
  const text = message.trim().replace(/\.$/, '');
  const rules: Array<[RegExp, (m: RegExpExecArray) => string]> = [
    [/^Too small: expected string to have >=?1 characters?$/i, () => 'must not be empty'],
    [/^Too small: expected string to have >=?(\d+) characters?$/i, (m) => `must be at least ${m[1]} characters`],
    [/^Too big: expected string to have <=?(\d+) characters?$/i, (m) => `must be at most ${m[1]} characters`],
    [/^Too small: expected array to have >=?1 items?$/i, () => 'needs at least one item'],
    [/^Too small: expected array to have >=?(\d+) items?$/i, (m) => `needs at least ${m[1]} items`],
    [/^Too big: expected array to have <=?(\d+) items?$/i, (m) => `takes at most ${m[1]} items`],
    [/^Too small: expected number to be >=?(-?[\d.]+)$/i, (m) => `must be at least ${m[1]}`],
    [/^Too big: expected number to be <=?(-?[\d.]+)$/i, (m) => `must be at most ${m[1]}`],
    [/^Invalid email( address)?$/i, () => 'must be a valid e-mail address'],
    [/^Invalid input: expected \w+, received undefined$/i, () => 'is required'],
    [/^Invalid input: expected (\w+), received \w+$/i, () => 'has the wrong type'],
    [/^Invalid (UUID|uuid)$/, () => 'must be a valid id'],
    [/^Invalid option: expected one of .*$/i, () => 'is not one of the allowed values'],
    [/^Invalid string: must match pattern .*$/i, () => 'has the wrong format'],
    [/^Invalid (ISO )?(datetime|date)$/i, () => 'must be a date and time'],
  ];
  for (const [pattern, say] of rules) {
    const match = pattern.exec(text);
    if (match) return say(match);
  }
  // The route's own wording ("must be the 6 digits from the authenticator app") reads as it is.
  if (/^(must|is|has|needs|cannot|can't|takes|should)\b/i.test(text)) return text.charAt(0).toLowerCase() + text.slice(1);
  return 'is not valid';
}

/**
 * The field a 400 names and a sentence about it: a route-schema failure
 * (`Invalid body field "code": …`) is reworded; a message a handler wrote for people ("The code
 * does not match…") is kept as it is. Undefined when no field is named.
 */
function validationOf(error: ApiError): { field: string; sentence: string } | undefined {
  if (error.code !== 'invalid_request') return undefined;
  const match = /^Invalid \w+ field "([^"]+)": (.*)$/s.exec(error.message);
  const field = error.field ?? match?.[1];
  if (!field || error.message.startsWith('Unknown field')) return undefined;
  if (!match) return { field, sentence: withoutApiPaths(error.message) };
  return { field, sentence: `${fieldLabel(field)} ${issueText(match[2]!)}.` };
}

/** Drops API paths a server message may mention ("(POST /api/auth/mfa/verify)"): readers never need them. */
function withoutApiPaths(message: string): string {
  return message.replace(/\s*\((?:[^()]*\/api\/[^()]*)\)/g, '').replace(/\s*(?:GET|POST|PUT|DELETE|PATCH)?\s*\/api\/\S*/g, '').trim();
}

/** A readable sentence for any error a call threw. */
export function messageOf(err: unknown): string {
  if (!(err instanceof ApiError)) return err instanceof Error && err.message ? err.message : 'Something went wrong.';
  const reason = err.details?.reason;
  if (reason === 'mfa_required') return 'Finish signing in first: enter the code from your authenticator app.';
  if (reason === 'mfa_enrolment_required') return 'This account must use two-step sign-in: set up an authenticator app first.';
  if (err.status === 0) return err.message;
  if (err.code === 'unauthenticated' && !/code|link/i.test(err.message)) return 'Your session has ended. Sign in again to continue.';
  if (err.code === 'not_found' && /^No route for/.test(err.message)) return 'This page or item does not exist. The link may be out of date.';
  if (err.code === 'rate_limited') {
    const wait = err.retryAfterSeconds;
    return `Too many attempts. ${wait ? `Wait ${formatWait(wait)}, then try again.` : 'Wait a moment, then try again.'}`;
  }
  if (err.status >= 500 && err.code !== 'unavailable') return 'Something went wrong on our side. Try again; if it keeps happening, share the reference below with your administrator.';
  if (err.code === 'invalid_request' && err.message.startsWith('Unknown field')) {
    return 'The dashboard sent something the server does not accept. Reload the page and try again.';
  }
  const validation = validationOf(err);
  if (validation) return validation.sentence;
  return withoutApiPaths(err.message) || 'Something went wrong.';
}

/**
 * Field → readable message for every field a 400 names: each of `details.issues`
 * (`[{field, issue}]`, decision 039), else the one `details.field`; empty when none.
 */
export function fieldErrorsOf(err: unknown): Record<string, string> {
  if (!(err instanceof ApiError)) return {};
  const fields: Record<string, string> = {};
  const issues = err.code === 'invalid_request' && Array.isArray(err.details?.issues) ? err.details.issues as Array<{ field?: unknown; issue?: unknown }> : [];
  for (const { field, issue } of issues) {
    if (typeof field === 'string' && typeof issue === 'string' && issue !== 'is not a known field') fields[field] = `${fieldLabel(field)} ${issueText(issue)}.`;
  }
  const validation = validationOf(err);
  if (validation) fields[validation.field] = validation.sentence;
  return fields;
}

/**
 * The error a form shows above its fields: none when every field the API named is one the form
 * marks beside its input (`shown`), else the error itself.
 */
export function generalError(err: unknown, shown: readonly string[]): unknown {
  const named = Object.keys(fieldErrorsOf(err));
  return named.length > 0 && named.every((field) => shown.includes(field)) ? undefined : err;
}

/** `42 s`, `3 min`, `1 h 5 min`. */
export function formatWait(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.ceil(s / 60)} min`;
  const h = Math.floor(s / 3600);
  const m = Math.ceil((s % 3600) / 60);
  return m ? `${h} h ${m} min` : `${h} h`;
}

/** What an error view shows: the sentence, the request id, how long to wait, whether Retry can help. */
export function describeError(err: unknown): { message: string; requestId?: string; retryAfterSeconds?: number; retryable: boolean; status?: number } {
  const message = messageOf(err);
  if (!(err instanceof ApiError)) return { message, retryable: true };
  return {
    message,
    retryable: err.retryable,
    status: err.status,
    ...(err.requestId ? { requestId: err.requestId } : {}),
    ...(err.retryAfterSeconds ? { retryAfterSeconds: err.retryAfterSeconds } : {}),
  };
}
