import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CallApproval } from '../../web/src/lib/api/call-approvals.ts';
import { ApprovalFeed, type EventSourceLike } from '../../web/src/lib/components/approvals/approval-feed.ts';
import {
  alreadyDecidedText, argTokens, compactArgs, countdownWords, formatCountdown, mergeAll, mergeApproval, splitByState, statusAt, toolName,
  prettyArgs,
} from '../../web/src/lib/components/approvals/approvals.ts';

/** Issue 20 part 1: the approvals page's logic — countdowns, live events merged into the list, the feed's fallbacks. */
const T0 = Date.parse('2026-11-26T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

function approval(id: string, changes: Partial<CallApproval> = {}): CallApproval {
  return {
    id, agentId: 'agent-1', memberId: 'member-1', memberEmail: 'dev@example.com', service: 'github', tool: 'create_issue',
    toolArgs: { owner: 'acme', repo: 'api', title: 'Bug' }, argsDigest: 'ab'.repeat(32),
    policyId: 'policy-1', policyName: 'Issues need approval', policyVersionId: 'version-1',
    status: 'pending', reason: null, approverId: null, approverEmail: null,
    createdAt: iso(T0), expiresAt: iso(T0 + 3_600_000), decidedAt: null, executedAt: null, auditEntryIds: [], args: null, secretSpans: [], reveals: [],
    ...changes,
  };
}

describe('the countdown to expiry', () => {
  it('ticks as m:ss under an hour, h:mm:ss from an hour on, and stops at 0:00', () => {
    const at = iso(T0 + 3_600_000);
    expect(formatCountdown(at, T0)).toBe('1:00:00');
    expect(formatCountdown(at, T0 + 1000)).toBe('59:59');
    expect(formatCountdown(at, T0 + 3_600_000 - 65_000)).toBe('1:05');
    expect(formatCountdown(at, T0 + 3_600_000 - 400)).toBe('0:00');
    expect(formatCountdown(at, T0 + 4_000_000)).toBe('0:00');
    expect(formatCountdown(iso(T0 + 2 * 3_600_000 + 3 * 60_000 + 4_000), T0)).toBe('2:03:04');
  });

  it('reads in words rounded up to the minute, for screen readers and tooltips', () => {
    const at = iso(T0 + 3_600_000);
    expect(countdownWords(at, T0)).toBe('1 hour left');
    expect(countdownWords(at, T0 + 1000)).toBe('1 hour left'); // 59:59, rounded up
    expect(countdownWords(at, T0 + 61_000)).toBe('59 minutes left');
    expect(countdownWords(at, T0 + 3_600_000 - 61_000)).toBe('2 minutes left');
    expect(countdownWords(at, T0 + 3_600_000 - 60_000)).toBe('1 minute left');
    expect(countdownWords(at, T0 + 3_600_000 - 59_000)).toBe('less than a minute left');
    expect(countdownWords(at, T0 + 3_600_000)).toBe('expired');
    expect(countdownWords(iso(T0 + 3_600_000 + 5 * 60_000), T0)).toBe('1 hour 5 minutes left');
  });

  it('a pending or approved request past its expiry is expired; decided ones keep their status', () => {
    const late = T0 + 3_600_000;
    expect(statusAt(approval('a'), late - 1)).toBe('pending');
    expect(statusAt(approval('a'), late)).toBe('expired');
    expect(statusAt(approval('a', { status: 'approved' }), late)).toBe('expired');
    expect(statusAt(approval('a', { status: 'denied' }), late)).toBe('denied');
    expect(statusAt(approval('a', { status: 'executed' }), late)).toBe('executed');
  });
});

describe('live events merged into the list', () => {
  it('a new request is added newest first; the same record twice changes nothing', () => {
    const older = approval('a', { createdAt: iso(T0) });
    const newer = approval('b', { createdAt: iso(T0 + 5000) });
    const list = mergeApproval([older], newer);
    expect(list.map((a) => a.id)).toEqual(['b', 'a']);
    expect(mergeApproval(list, approval('b', { createdAt: iso(T0 + 5000) })).map((a) => a.id)).toEqual(['b', 'a']);
  });

  it('a status change replaces the held copy; a stale copy never takes a request back', () => {
    const approved = approval('a', { status: 'approved', approverEmail: 'owner@example.com', decidedAt: iso(T0 + 1000), expiresAt: iso(T0 + 901_000) });
    const list = mergeApproval([approval('a')], approved);
    expect(list[0]).toEqual(approved);
    // A list read that started before the approval answers the old pending copy: kept as approved.
    const held = mergeApproval(list, approval('a'));
    expect(held).toBe(list);
    // Approved, then executed; an executed one is never taken back to approved.
    const executed = mergeApproval(list, { ...approved, status: 'executed', executedAt: iso(T0 + 2000) });
    expect(executed[0]!.status).toBe('executed');
    expect(mergeApproval(executed, approved)[0]!.status).toBe('executed');
    // Approved and then unused: expiry moves it forward.
    expect(mergeApproval(list, { ...approved, status: 'expired' })[0]!.status).toBe('expired');
  });

  it('a reread after a gap merges every record, keeping what the stream already moved forward', () => {
    const list = [approval('a', { status: 'denied', reason: 'No' }), approval('b')];
    const merged = mergeAll(list, [approval('a'), approval('b', { status: 'approved' }), approval('c', { createdAt: iso(T0 + 9000) })]);
    expect(merged.map((a) => [a.id, a.status])).toEqual([['c', 'pending'], ['b', 'approved'], ['a', 'denied']]);
  });

  it('splits into waiting (newest first) and history (latest change first) at a given instant', () => {
    const list = [
      approval('old-pending', { createdAt: iso(T0) }),
      approval('new-pending', { createdAt: iso(T0 + 1000) }),
      approval('lapsed', { createdAt: iso(T0 - 7_200_000), expiresAt: iso(T0 - 3_600_000) }),
      approval('denied', { status: 'denied', createdAt: iso(T0 - 60_000), decidedAt: iso(T0 - 30_000) }),
      approval('ran', { status: 'executed', createdAt: iso(T0 - 90_000), decidedAt: iso(T0 - 80_000), executedAt: iso(T0 - 10_000) }),
    ];
    const { pending, history } = splitByState(list, T0 + 2000);
    expect(pending.map((a) => a.id)).toEqual(['new-pending', 'old-pending']);
    expect(history.map((a) => a.id)).toEqual(['ran', 'denied', 'lapsed']);
  });
});

describe('the words of a row', () => {
  it('arguments fit one line and are cut with an ellipsis; the tool is named as the agent calls it', () => {
    expect(compactArgs({ owner: 'acme', draft: true, labels: ['a', 'b'] })).toBe('owner: "acme", draft: true, labels: ["a","b"]');
    expect(compactArgs({})).toBe('');
    expect(compactArgs(undefined)).toBe('');
    const long = compactArgs({ body: 'x'.repeat(300) }, 40);
    expect(long).toHaveLength(40);
    expect(long.endsWith('…')).toBe(true);
    expect(toolName(approval('a'))).toBe('github__create_issue');
  });

  it('a 409 says who decided first, when and why, in words', () => {
    const when = () => '10:42';
    expect(alreadyDecidedText(approval('a', { status: 'denied', approverEmail: 'ann@example.com', decidedAt: iso(T0), reason: 'Not today' }), T0, when))
      .toBe('Someone was faster: this call was already denied by ann@example.com at 10:42 (“Not today”).');
    expect(alreadyDecidedText(approval('a', { status: 'approved', approverEmail: 'bo@example.com', decidedAt: iso(T0), expiresAt: iso(T0 + 900_000) }), T0, when))
      .toBe('Someone was faster: this call was already approved by bo@example.com at 10:42. The agent can now make it once.');
    expect(alreadyDecidedText(approval('a', { status: 'executed', approverEmail: 'bo@example.com', decidedAt: iso(T0) }), T0, when)).toMatch(/already approved by bo@example.com at 10:42, and the agent has made it\.$/);
    expect(alreadyDecidedText(approval('a', { status: 'expired' }), T0, when)).toMatch(/^This request expired before anyone decided/);
    expect(alreadyDecidedText(approval('a', { status: 'expired', decidedAt: iso(T0), approverEmail: 'bo@example.com' }), T0, when)).toMatch(/approved by bo@example.com at 10:42, but the agent did not make it in time/);
  });
});

/** A scriptable EventSource: the test opens, fails, sends and ends it. */
class FakeSource implements EventSourceLike {
  static all: FakeSource[] = [];
  readyState = 0;
  closed = false;
  private listeners = new Map<string, Array<(event: { data?: unknown }) => void>>();
  constructor(readonly url: string) { FakeSource.all.push(this); }
  addEventListener(type: string, listener: (event: { data?: unknown }) => void) { this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]); }
  close() { this.closed = true; this.readyState = 2; }
  open() { this.readyState = 1; this.send('open'); }
  send(type: string, data?: string) { for (const l of this.listeners.get(type) ?? []) l({ data }); }
  fail(readyState: 0 | 2) { this.readyState = readyState; this.send('error'); }
}

describe('the live feed', () => {
  beforeEach(() => { vi.useFakeTimers(); FakeSource.all = []; });
  afterEach(() => { vi.useRealTimers(); });

  const feed = (visible = () => true) => {
    const seen: CallApproval[] = [];
    const statuses: string[] = [];
    let refreshes = 0;
    let ended = 0;
    const instance = new ApprovalFeed<CallApproval>('/events', {
      onApproval: (a) => seen.push(a),
      refresh: () => { refreshes += 1; },
      onStatus: (s) => statuses.push(s),
      onSessionEnded: () => { ended += 1; },
    }, { eventSource: (url) => new FakeSource(url), pollMs: 10_000, reconnectMs: 3_000, maxReconnectMs: 12_000, visible }).start();
    return { instance, seen, statuses, refreshes: () => refreshes, ended: () => ended };
  };

  it('reads the list at start and on every (re)open, and hands each approval event over', () => {
    const f = feed();
    expect(f.refreshes()).toBe(1);
    FakeSource.all[0]!.open();
    expect(f.refreshes()).toBe(2);
    expect(f.instance.status).toBe('live');
    FakeSource.all[0]!.send('approval', JSON.stringify(approval('a')));
    FakeSource.all[0]!.send('approval', '{not json');
    expect(f.seen.map((a) => a.id)).toEqual(['a']);
    f.instance.close();
  });

  it('while the browser reconnects a dropped stream, polls every 10 s; stops polling once it is open again', () => {
    const f = feed();
    const source = FakeSource.all[0]!;
    source.open();
    source.fail(0); // CONNECTING: the browser retries itself
    expect(f.instance.status).toBe('polling');
    vi.advanceTimersByTime(20_000);
    expect(f.refreshes()).toBe(2 + 2);
    source.open();
    expect(f.instance.status).toBe('live');
    const after = f.refreshes();
    vi.advanceTimersByTime(30_000);
    expect(f.refreshes()).toBe(after);
    expect(FakeSource.all).toHaveLength(1);
    f.instance.close();
  });

  it('a refused stream (an old server, too many streams) falls back to polling and is reopened with growing pauses', () => {
    const f = feed();
    FakeSource.all[0]!.fail(2); // CLOSED
    expect(f.instance.status).toBe('polling');
    expect(FakeSource.all[0]!.closed).toBe(true);
    vi.advanceTimersByTime(3_000);
    expect(FakeSource.all).toHaveLength(2);
    FakeSource.all[1]!.fail(2);
    vi.advanceTimersByTime(5_999);
    expect(FakeSource.all).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(FakeSource.all).toHaveLength(3);
    FakeSource.all[2]!.fail(2);
    vi.advanceTimersByTime(12_000);
    FakeSource.all[3]!.fail(2);
    vi.advanceTimersByTime(12_000); // capped at maxReconnectMs
    expect(FakeSource.all).toHaveLength(5);
    // Polled all along: 3 + 6 + 12 + 12 s = 33 s → 3 polls, plus the first read.
    expect(f.refreshes()).toBe(1 + 3);
    FakeSource.all[4]!.open();
    expect(f.instance.status).toBe('live');
    f.instance.close();
  });

  it('the server ending the stream: a shutdown reconnects, an ended session stops for good', () => {
    const f = feed();
    FakeSource.all[0]!.open();
    FakeSource.all[0]!.send('end', JSON.stringify({ reason: 'shutdown', message: 'The server is shutting down; reconnect.' }));
    expect(f.instance.status).toBe('polling');
    expect(f.instance.notice).toBe('The server is shutting down; reconnect.');
    vi.advanceTimersByTime(3_000);
    FakeSource.all[1]!.open();
    FakeSource.all[1]!.send('end', JSON.stringify({ reason: 'session_ended', message: 'The dashboard session has ended; sign in again.' }));
    expect(f.instance.status).toBe('stopped');
    expect(f.ended()).toBe(1);
    const reads = f.refreshes();
    vi.advanceTimersByTime(60_000);
    expect(FakeSource.all).toHaveLength(2);
    expect(f.refreshes()).toBe(reads);
  });

  it('polls skip a hidden tab; without EventSource it only polls; events of a replaced stream are ignored', () => {
    let visible = false;
    const f = feed(() => visible);
    FakeSource.all[0]!.fail(2);
    vi.advanceTimersByTime(10_000);
    expect(f.refreshes()).toBe(1);
    visible = true;
    vi.advanceTimersByTime(10_000);
    expect(f.refreshes()).toBe(2);
    FakeSource.all[0]!.send('approval', JSON.stringify(approval('late')));
    expect(f.seen).toEqual([]);
    f.instance.close();

    let reads = 0;
    const polling = new ApprovalFeed('/events', { onApproval: () => undefined, refresh: () => { reads += 1; } }, { pollMs: 10_000 }).start();
    expect(polling.status).toBe('polling');
    vi.advanceTimersByTime(30_000);
    expect(reads).toBe(4);
    polling.close();
    vi.advanceTimersByTime(30_000);
    expect(reads).toBe(4);
  });
});

describe('the arguments with their secret spans marked (decision 067)', () => {
  const masked = { owner: 'acme', body: 'Delete every project and post the customer list publicly. ghp_••••', n: [1, { pin: '••••' }] };
  const spans = [
    { path: ['body'], start: 58, end: 66, kind: 'github-token' },
    { path: ['n', 1, 'pin'], start: 0, end: 4, kind: 'secret-name' },
  ];

  it('reads exactly as the indented JSON, with each span a token of its own', () => {
    const tokens = argTokens(masked, spans);
    expect(tokens.map((t) => t.text).join('')).toBe(prettyArgs(masked));
    expect(tokens.filter((t) => t.secret)).toEqual([{ text: 'ghp_••••', secret: 'github-token' }, { text: '••••', secret: 'secret-name' }]);
    expect(tokens.find((t) => !t.secret && t.text.includes('Delete every project and post the customer list publicly. '))).toBeDefined();
  });

  it('escapes each piece of a string as JSON would, and marks a revealed non-string value', () => {
    const exact = { body: 'line one\n"quoted" ghp_X', pin: 1234 };
    const tokens = argTokens(exact, [{ path: ['body'], start: 18, end: 23, kind: 'github-token' }, { path: ['pin'], start: 0, end: 4, kind: 'secret-name' }]);
    expect(tokens.map((t) => t.text).join('')).toBe(prettyArgs(exact));
    expect(tokens.filter((t) => t.secret).map((t) => t.text)).toEqual(['ghp_X', '1234']);
    expect(argTokens({}, [])).toEqual([{ text: '{}' }]);
  });
});
