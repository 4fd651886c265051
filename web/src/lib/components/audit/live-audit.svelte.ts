import type { AuditEntry } from '$lib/api/types.ts';
import type { StreamEnd } from '$lib/api/audit.ts';

export type LiveStatus = 'connecting' | 'live' | 'reconnecting' | 'stopped';

/** How long to wait before opening a new stream after the server ended one (its own `retry` is 3 s). */
const RECONNECT_MS = 3_000;

/**
 * One live subscription to GET /api/audit/stream (decision 015). The stream replays nothing,
 * so every (re)connection after the first calls `onGap` for the page to refill from
 * GET /api/audit. The server's `event: end` is handled here: `session_ended` stops for good
 * (signing in again is needed), `overflow` and `shutdown` reconnect after a pause. A refused
 * stream (401, 429, 400) leaves the EventSource closed: that stops too, with a readable note.
 */
export class LiveAudit {
  status = $state<LiveStatus>('connecting');
  notice = $state<string>();

  private source: EventSource | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  private opened = false;

  constructor(private readonly url: string, private readonly handlers: {
    onEntry: (entry: AuditEntry) => void;
    onGap: () => void;
    onSessionEnded: () => void;
  }) {
    this.open();
  }

  private open(): void {
    if (this.closed) return;
    const source = new EventSource(this.url);
    this.source = source;
    source.onopen = () => {
      if (this.opened) this.handlers.onGap();
      this.opened = true;
      this.status = 'live';
      this.notice = undefined;
    };
    source.addEventListener('entry', (event) => {
      try {
        this.handlers.onEntry(JSON.parse((event as MessageEvent<string>).data) as AuditEntry);
      } catch { /* a malformed frame is skipped, the next one still counts */ }
    });
    source.addEventListener('end', (event) => {
      source.close();
      let end: StreamEnd = { reason: 'unknown', message: 'The server ended the live stream.' };
      try { end = JSON.parse((event as MessageEvent<string>).data) as StreamEnd; } catch { /* keep the default */ }
      if (end.reason === 'session_ended') {
        this.stop(end.message);
        this.handlers.onSessionEnded();
        return;
      }
      this.status = 'reconnecting';
      this.notice = end.message;
      this.timer = setTimeout(() => this.open(), RECONNECT_MS);
    });
    source.onerror = () => {
      if (this.closed || this.source !== source) return;
      // CONNECTING: the browser retries by itself (network blip, server restart).
      if (source.readyState === EventSource.CONNECTING) { this.status = 'reconnecting'; return; }
      // CLOSED: the server refused the stream (signed out, too many streams, bad filter).
      this.stop('Live updates stopped: the server refused the stream. Reload the page to try again.');
    };
  }

  private stop(notice: string): void {
    this.close();
    this.status = 'stopped';
    this.notice = notice;
  }

  /** Ends the subscription for good (page left, live turned off, filters changed). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.source?.close();
    this.source = undefined;
  }
}
