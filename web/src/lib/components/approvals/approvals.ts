/**
 * The approvals page's logic, as pure functions (issue 20 part 1, decision 063): what a
 * request's state is at a given instant, how a live event merges into the list the page holds,
 * the countdown to expiry, a compact line of the arguments, the arguments with their secret
 * spans marked (decision 067), and the words for a request that someone else decided first.
 * Only the shape of a call approval is imported (types, no runtime).
 */
import type { CallApproval, CallApprovalStatus } from '../../api/call-approvals.ts';

/**
 * How far along a request is. A record only ever moves forward (pending → approved | denied |
 * expired; approved → executed | expired), so of two copies of one request the one further
 * along is the newer; at the same step the later copy wins (an approval's `expiresAt` moves).
 */
const STEP: Record<CallApprovalStatus, number> = { pending: 0, approved: 1, denied: 2, expired: 2, executed: 3 };

/** The status as the page shows it at `now`: pending or approved past `expiresAt` is expired (the contract). */
export function statusAt(approval: Pick<CallApproval, 'status' | 'expiresAt'>, now: number): CallApprovalStatus {
  if ((approval.status === 'pending' || approval.status === 'approved') && Date.parse(approval.expiresAt) <= now) return 'expired';
  return approval.status;
}

/** Newest first, by `createdAt`, then id (a stable order for requests made in the same millisecond). */
export function newestFirst(a: Pick<CallApproval, 'createdAt' | 'id'>, b: Pick<CallApproval, 'createdAt' | 'id'>): number {
  return Date.parse(b.createdAt) - Date.parse(a.createdAt) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

/**
 * `incoming` (a live event or a freshly read record) merged into `list`: added when new,
 * replacing the held copy unless that copy is further along (an event that overtook the page's
 * own read). Answers the same array when nothing changed, else a new one, newest first.
 */
export function mergeApproval(list: readonly CallApproval[], incoming: CallApproval): CallApproval[] {
  const at = list.findIndex((a) => a.id === incoming.id);
  if (at === -1) return [...list, incoming].sort(newestFirst);
  const held = list[at]!;
  if (STEP[held.status] > STEP[incoming.status]) return list as CallApproval[];
  const next = [...list];
  next[at] = incoming;
  return next;
}

/** Every record of `fresh` (a page reread after a gap) merged into `list`, as `mergeApproval` merges one. */
export function mergeAll(list: readonly CallApproval[], fresh: readonly CallApproval[]): CallApproval[] {
  let next = list as CallApproval[];
  for (const approval of fresh) next = mergeApproval(next, approval);
  return next;
}

/** Requests still waiting for a decision at `now`, newest first, and the rest (history), newest decided first. */
export function splitByState(list: readonly CallApproval[], now: number): { pending: CallApproval[]; history: CallApproval[] } {
  const pending: CallApproval[] = [];
  const history: CallApproval[] = [];
  for (const approval of list) (statusAt(approval, now) === 'pending' ? pending : history).push(approval);
  pending.sort(newestFirst);
  const changed = (a: CallApproval) => Date.parse(a.executedAt ?? a.decidedAt ?? a.createdAt);
  history.sort((a, b) => changed(b) - changed(a) || newestFirst(a, b));
  return { pending, history };
}

/**
 * Time left until `expiresAt`, for a ticking display: `59:07` under an hour, `1:00:00` from an
 * hour on, `0:00` once past (the page then shows the request as expired).
 */
export function formatCountdown(expiresAt: string, now: number): string {
  const left = Math.max(0, Math.floor((Date.parse(expiresAt) - now) / 1000));
  const h = Math.floor(left / 3600);
  const m = Math.floor((left % 3600) / 60);
  const s = left % 60;
  const two = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${two(m)}:${two(s)}` : `${m}:${two(s)}`;
}

/**
 * The same time left in words, rounded up to the minute (what a screen reader announces and
 * the tooltip says): `59 minutes left`, `1 hour 5 minutes left`, `less than a minute left`, `expired`.
 */
export function countdownWords(expiresAt: string, now: number): string {
  const ms = Date.parse(expiresAt) - now;
  if (!(ms > 0)) return 'expired';
  if (ms < 60_000) return 'less than a minute left';
  const minutes = Math.ceil(ms / 60_000);
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return `${[h ? unit(h, 'hour') : '', m ? unit(m, 'minute') : ''].filter(Boolean).join(' ')} left`;
}

/**
 * The arguments in one line for a dense row: `owner: "acme", repo: "api", draft: true`; nested
 * values as compact JSON; cut with `…` past `max` characters (the full JSON is one click away).
 */
export function compactArgs(args: unknown, max = 120): string {
  if (args === null || args === undefined) return '';
  const text = typeof args === 'object' && !Array.isArray(args)
    ? Object.entries(args as Record<string, unknown>).map(([key, value]) => `${key}: ${JSON.stringify(value) ?? 'undefined'}`).join(', ')
    : JSON.stringify(args) ?? '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The full arguments for the expanded view: indented JSON. */
export function prettyArgs(args: unknown): string {
  return JSON.stringify(args ?? {}, null, 2);
}

/** A secret-looking span of one value of the arguments, as the API lists it (decision 067). */
export type ArgSpan = CallApproval['secretSpans'][number];

/** A piece of the arguments' text: plain, or a secret span (`secret` = the rule that found it). */
export interface ArgToken { text: string; secret?: string }

/**
 * The arguments as indented JSON (as `prettyArgs` writes them), cut into tokens so that each
 * secret span is a token of its own: the page marks it (masked: `ghp_••••`; revealed: the
 * value, highlighted). Offsets of a span are in the string value, so each string is escaped
 * piece by piece; a span on a non-string value (a secret-named key's number) covers its JSON.
 */
export function argTokens(args: unknown, spans: readonly ArgSpan[]): ArgToken[] {
  const byPath = new Map<string, ArgSpan[]>();
  for (const span of spans) {
    const key = JSON.stringify(span.path);
    byPath.set(key, [...(byPath.get(key) ?? []), span]);
  }
  const tokens: ArgToken[] = [];
  const push = (text: string, secret?: string) => {
    if (!text) return;
    const last = tokens[tokens.length - 1];
    if (!secret && last && !last.secret) last.text += text;
    else tokens.push(secret ? { text, secret } : { text });
  };
  const escaped = (text: string) => JSON.stringify(text).slice(1, -1);

  const walk = (value: unknown, path: Array<string | number>, indent: string) => {
    const here = byPath.get(JSON.stringify(path)) ?? [];
    if (typeof value === 'string') {
      let from = 0;
      push('"');
      for (const span of [...here].sort((a, b) => a.start - b.start)) {
        if (span.start < from || span.end > value.length) continue;
        push(escaped(value.slice(from, span.start)));
        push(escaped(value.slice(span.start, span.end)), span.kind);
        from = span.end;
      }
      push(`${escaped(value.slice(from))}"`);
      return;
    }
    const inner = `${indent}  `;
    if (Array.isArray(value)) {
      if (value.length === 0) { push('[]'); return; }
      push('[\n');
      value.forEach((item, i) => { push(inner); walk(item, [...path, i], inner); push(i < value.length - 1 ? ',\n' : '\n'); });
      push(`${indent}]`);
      return;
    }
    if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length === 0) { push('{}'); return; }
      push('{\n');
      entries.forEach(([key, item], i) => { push(`${inner}${JSON.stringify(key)}: `); walk(item, [...path, key], inner); push(i < entries.length - 1 ? ',\n' : '\n'); });
      push(`${indent}}`);
      return;
    }
    push(JSON.stringify(value) ?? 'null', here[0]?.kind);
  };
  walk(args ?? {}, [], '');
  return tokens;
}

/** `service__tool`, as the agent names the tool in its call. */
export function toolName(approval: Pick<CallApproval, 'service' | 'tool'>): string {
  return approval.service ? `${approval.service}__${approval.tool}` : approval.tool;
}

/** The status as a word for people. */
export function statusLabel(status: CallApprovalStatus): string {
  switch (status) {
    case 'pending': return 'Waiting';
    case 'approved': return 'Approved';
    case 'denied': return 'Denied';
    case 'expired': return 'Expired';
    case 'executed': return 'Approved, ran';
  }
}

/**
 * Why Approve or Deny did nothing (the API's 409): what happened to the request, in words, from
 * its current record. `when` formats an instant (the page passes the dashboard's formatter).
 */
export function alreadyDecidedText(current: CallApproval, now: number, when: (iso: string) => string = (iso) => iso): string {
  const by = current.approverEmail ? ` by ${current.approverEmail}` : '';
  const at = current.decidedAt ? ` at ${when(current.decidedAt)}` : '';
  const reason = current.reason ? ` (“${current.reason}”)` : '';
  switch (statusAt(current, now)) {
    case 'approved': return `Someone was faster: this call was already approved${by}${at}${reason}. The agent can now make it once.`;
    case 'executed': return `Someone was faster: this call was already approved${by}${at}${reason}, and the agent has made it.`;
    case 'denied': return `Someone was faster: this call was already denied${by}${at}${reason}.`;
    case 'expired': return current.decidedAt
      ? `This call was approved${by}${at}, but the agent did not make it in time: the approval has expired.`
      : 'This request expired before anyone decided: the agent has to make the call again to ask anew.';
    case 'pending': return 'The server refused the decision, though the request still waits. Reload the page and try again.';
  }
}
