/**
 * The approvals page's live feed (issue 20 part 1): server-sent events from
 * GET /api/agents/:id/call-approvals/events (`event: approval`, data: the record; framed like the
 * audit stream, decision 015), and a reread of the list whenever events may have been missed.
 *
 * - Every time the stream opens (the first time too: a request made between the page's read and
 *   the stream's start would be missed otherwise) `refresh` rereads the list.
 * - While the stream is not open — dropped, refused (an old server without the route, too many
 *   streams) or not supported — the list is reread every `pollMs` (10 s), and the stream is
 *   opened again after `reconnectMs`, doubling up to `maxReconnectMs`.
 * - `event: end` from the server: `session_ended` stops for good (sign in again); any other
 *   reason reconnects after `reconnectMs`.
 *
 * Plain TypeScript (no runes) so the test suite drives it with a fake EventSource and fake timers;
 * the page mirrors `status` into its own state through `onStatus`.
 */
export type FeedStatus = 'connecting' | 'live' | 'polling' | 'stopped';

/** The part of the browser's EventSource the feed uses. */
export interface EventSourceLike {
  readonly readyState: number;
  /** `open`, `error`, and the server's events (`approval`, `end`: `data` is their text). */
  addEventListener(type: string, listener: (event: { data?: unknown }) => void): void;
  close(): void;
}
export type EventSourceFactory = (url: string) => EventSourceLike;

export interface FeedHandlers<T> {
  /** One record from an `approval` event. */
  onApproval(record: T): void;
  /** Reread the list (the stream replays nothing). Failures are the page's to show. */
  refresh(): Promise<void> | void;
  onStatus?(status: FeedStatus, notice?: string): void;
  onSessionEnded?(): void;
}

export interface FeedOptions {
  pollMs?: number;
  reconnectMs?: number;
  maxReconnectMs?: number;
  /** The EventSource to use; absent (no `EventSource` in this browser): polling only. */
  eventSource?: EventSourceFactory | undefined;
  /** Whether the page is visible: polls are skipped while it is not (defaults to always). */
  visible?: () => boolean;
}

const CLOSED = 2;

export class ApprovalFeed<T> {
  status: FeedStatus = 'connecting';
  notice: string | undefined;

  private source: EventSourceLike | undefined;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  private backoff: number;
  private readonly pollMs: number;
  private readonly reconnectMs: number;
  private readonly maxReconnectMs: number;
  private readonly factory: EventSourceFactory | undefined;
  private readonly visible: () => boolean;

  constructor(private readonly url: string, private readonly handlers: FeedHandlers<T>, options: FeedOptions = {}) {
    this.pollMs = options.pollMs ?? 10_000;
    this.reconnectMs = options.reconnectMs ?? 3_000;
    this.maxReconnectMs = options.maxReconnectMs ?? 60_000;
    this.backoff = this.reconnectMs;
    this.factory = options.eventSource;
    this.visible = options.visible ?? (() => true);
  }

  /** Reads the list once and opens the stream (or starts polling where there is no EventSource). */
  start(): this {
    void this.handlers.refresh();
    if (this.factory) this.open();
    else this.fallBack('Live updates are not available in this browser: the list refreshes every few seconds.');
    return this;
  }

  private set(status: FeedStatus, notice?: string): void {
    this.status = status;
    this.notice = notice;
    this.handlers.onStatus?.(status, notice);
  }

  private open(): void {
    if (this.closed || !this.factory) return;
    let source: EventSourceLike;
    try {
      source = this.factory(this.url);
    } catch {
      this.fallBack('Live updates are unavailable: the list refreshes every few seconds.');
      return;
    }
    this.source = source;
    source.addEventListener('open', () => {
      if (this.source !== source) return;
      this.backoff = this.reconnectMs;
      this.stopPolling();
      this.set('live');
      void this.handlers.refresh();
    });
    source.addEventListener('approval', (event) => {
      if (this.source !== source) return;
      let record: T;
      try { record = JSON.parse(String(event.data)) as T; } catch { return; } // a malformed frame is skipped
      this.handlers.onApproval(record);
    });
    source.addEventListener('end', (event) => {
      if (this.source !== source) return;
      source.close();
      this.source = undefined;
      let reason = 'unknown';
      let message = 'The server ended the live stream.';
      try { ({ reason, message } = JSON.parse(String(event.data)) as { reason: string; message: string }); } catch { /* keep the defaults */ }
      if (reason === 'session_ended') {
        this.close();
        this.set('stopped', message);
        this.handlers.onSessionEnded?.();
        return;
      }
      this.fallBack(message);
    });
    source.addEventListener('error', () => {
      if (this.closed || this.source !== source) return;
      // Whether the browser retries by itself (CONNECTING) or gave up (CLOSED: refused), the
      // list is polled until a stream is open again; a closed one is reopened here, with backoff.
      if (source.readyState === CLOSED) {
        source.close();
        this.source = undefined;
        this.fallBack('Live updates were interrupted: the list refreshes every 10 seconds while reconnecting.');
      } else if (this.status !== 'polling') {
        this.startPolling();
        this.set('polling', 'Live updates were interrupted: the list refreshes every 10 seconds while reconnecting.');
      }
    });
  }

  /** Polls, and opens the stream again after the current backoff. */
  private fallBack(notice: string): void {
    if (this.closed) return;
    this.startPolling();
    this.set('polling', notice);
    if (!this.factory) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.open(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, this.maxReconnectMs);
  }

  private startPolling(): void {
    if (this.pollTimer !== undefined || this.closed) return;
    this.pollTimer = setInterval(() => { if (this.visible()) void this.handlers.refresh(); }, this.pollMs);
  }

  private stopPolling(): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }

  /** Ends the feed for good (the page is left). */
  close(): void {
    this.closed = true;
    this.stopPolling();
    clearTimeout(this.reconnectTimer);
    this.source?.close();
    this.source = undefined;
  }
}
