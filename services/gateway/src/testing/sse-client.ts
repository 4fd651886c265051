/** One server-sent event as a client sees it (`event` defaults to `message`). */
export interface SseEvent { event: string; id?: string; data: string }

export interface SseStream {
  status: number;
  headers: Headers;
  /** The body when the answer is not a stream (an error), else ''. */
  errorBody: string;
  /** Events so far, in arrival order. */
  events: SseEvent[];
  /** Comment lines so far (heartbeats), without the leading colon. */
  comments: string[];
  /** The first event, from the start of the stream, that satisfies `predicate`; rejects after `timeoutMs`. */
  waitFor(predicate: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves once `predicate` holds for the comments received (checked on each one). */
  waitForComment(predicate: (c: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Resolves when the server has ended the body (or the client closed it). */
  ended: Promise<void>;
  /** Starts reading, when opened with `paused`. */
  resume(): void;
  /** Hangs up. */
  close(): void;
}

/**
 * A browser-less server-sent-events client: plain `fetch` and the body's byte stream, parsed
 * as the EventSource specification says (fields `event`, `id`, `data`; blank line dispatches;
 * `:` starts a comment). `paused` leaves the body unread until `resume()`, to play a slow reader.
 */
export async function openSseStream(url: string, options: { headers?: Record<string, string>; paused?: boolean } = {}): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...options.headers }, signal: abort.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const listeners = new Set<() => void>();
  const notify = () => { for (const l of [...listeners]) l(); };
  let finished = false;

  const isStream = res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  const errorBody = isStream ? '' : await res.text();

  let startReading: () => void = () => undefined;
  const started = new Promise<void>((resolve) => { startReading = resolve; });
  if (!options.paused) startReading();

  const ended = (async () => {
    if (!isStream || !res.body) { finished = true; return; }
    await started;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let current: { event?: string; id?: string; data: string[] } = { data: [] };
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let newline: number;
        while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
          if (line === '') {
            if (current.data.length > 0 || current.event) {
              events.push({ event: current.event ?? 'message', ...(current.id !== undefined ? { id: current.id } : {}), data: current.data.join('\n') });
              notify();
            }
            current = { data: [] };
          } else if (line.startsWith(':')) {
            comments.push(line.slice(1).trim());
            notify();
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') current.event = value;
            else if (field === 'id') current.id = value;
            else if (field === 'data') current.data.push(value);
          }
        }
      }
    } catch {
      // aborted by close()
    } finally {
      finished = true;
      notify();
    }
  })();

  function waitUntil<T>(find: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = find();
        if (found !== undefined) { done(); resolve(found); } else if (finished) { done(); reject(new Error(`the stream ended before ${what}`)); }
      };
      const timer = setTimeout(() => { done(); reject(new Error(`no ${what} within ${timeoutMs} ms (events: ${events.map((e) => e.event).join(', ') || 'none'})`)); }, timeoutMs);
      const done = () => { clearTimeout(timer); listeners.delete(check); };
      listeners.add(check);
      check();
    });
  }

  return {
    status: res.status,
    headers: res.headers,
    errorBody,
    events,
    comments,
    waitFor: (predicate, timeoutMs = 5_000) => waitUntil(() => events.find(predicate), 'matching event', timeoutMs),
    waitForComment: (predicate, timeoutMs = 5_000) => waitUntil(() => comments.find(predicate), 'matching comment', timeoutMs),
    ended,
    resume: () => startReading(),
    close: () => { abort.abort(); startReading(); },
  };
}
