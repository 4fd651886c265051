import { callApprovalsApi, type CallApproval } from './api/call-approvals.ts';
import { statusAt } from './components/approvals/approvals.ts';

/** How often the count is reread while something shows it (the nav badge is always shown). */
const REFRESH_MS = 30_000;

/** The one about to expire first on top (as the API orders them): the most urgent decision. */
const soonestFirst = (a: CallApproval, b: CallApproval) => Date.parse(a.expiresAt) - Date.parse(b.expiresAt) || (a.id < b.id ? -1 : 1);

/**
 * The calls waiting for an owner's decision across every agent the reader owns
 * (GET /api/dashboard/call-approvals): the header's badge, the home overview's card and the agent
 * tab's count read this one state. Polled every 30 s while the layout holds it (`use()`); the
 * approvals page tells it about what it sees live (`apply`) so the badge moves at once.
 */
class PendingCallApprovals {
  approvals = $state<CallApproval[]>([]);
  loaded = $state(false);
  error = $state<unknown>();
  /** When the list was last read: a request past its expiry by then is no longer counted. */
  now = $state(Date.now());
  #users = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #seq = 0;

  /** The ones still open now (a request past its expiry drops out before the next read). */
  get pending(): CallApproval[] {
    return this.approvals.filter((a) => statusAt(a, this.now) === 'pending');
  }

  get count(): number {
    return this.pending.length;
  }

  countFor(agentId: string): number {
    return this.pending.filter((a) => a.agentId === agentId).length;
  }

  async refresh(): Promise<void> {
    const mine = ++this.#seq;
    try {
      const answer = await callApprovalsApi.pendingAcrossAgents();
      if (mine !== this.#seq) return;
      this.approvals = [...answer.approvals].sort(soonestFirst);
      this.error = undefined;
      this.now = Date.now();
    } catch (err) {
      if (mine === this.#seq) this.error = err;
    } finally {
      if (mine === this.#seq) this.loaded = true;
    }
  }

  /** A record seen live elsewhere (the approvals page): added while pending, dropped once decided. */
  apply(record: CallApproval): void {
    const others = this.approvals.filter((a) => a.id !== record.id);
    this.approvals = record.status === 'pending' ? [...others, record].sort(soonestFirst) : others;
  }

  /** Reads now and every 30 s while the tab is visible, until the returned function is called. */
  use(): () => void {
    this.#users += 1;
    if (this.#users === 1) {
      void this.refresh();
      this.#timer = setInterval(() => {
        if (typeof document === 'undefined' || document.visibilityState === 'visible') void this.refresh();
      }, REFRESH_MS);
    }
    return () => {
      this.#users -= 1;
      if (this.#users === 0) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  /** Signed out: nothing is shown until the next session reads its own. */
  clear(): void {
    this.#seq += 1;
    this.approvals = [];
    this.loaded = false;
    this.error = undefined;
  }
}

export const pendingCallApprovals = new PendingCallApprovals();
