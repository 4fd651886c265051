import { ApiError, redactPolicyIdentities, type AuditEntry, type Bus, type Database } from '@portcullis/core';
import type { AuthService } from '../auth/auth-service.ts';
import { auditScopesOf, type AuditScope } from './audit-scope.ts';
import { matchesLiveFilter, type LiveAuditFilter } from './audit-stream-filter.ts';

/** Why the server ended a stream; sent as the last event's `reason`. */
export type StreamEndReason = 'overflow' | 'session_ended' | 'shutdown';

/** Where one live stream's events go: the SSE writer of one HTTP response. */
export interface AuditStreamSink {
  /** One entry, already serialised by the hub (an entry is serialised once, whoever receives it). */
  entry(id: string, json: string): void;
  heartbeat(): void;
  /** The server ends the stream; the sink says why and closes the response. */
  end(reason: StreamEndReason): void;
}

export interface AuditStreamViewer { userId: string; sessionId: string }

export interface AuditStreamHub {
  /**
   * Registers a stream for `viewer`; resolves once its visible agents are known (so it cannot
   * miss or leak an entry published after it resolves), with the function that unregisters it.
   * 429 `rate_limited` when the user already has `maxStreamsPerUser` streams on this replica.
   */
  open(viewer: AuditStreamViewer, filter: LiveAuditFilter, sink: AuditStreamSink): Promise<() => void>;
  /** Ends every stream (`shutdown`) and lets go of the bus. */
  close(): void;
  /** Open streams on this replica. */
  readonly size: number;
}

/** What a viewer may see, as sets: the viewer's `AuditScope`. */
interface Visibility {
  /** The agents whose entries the viewer may read. */
  agents: ReadonlySet<string>;
  /** Of those, the agents whose policy identities the viewer may not see (decision 022). */
  redacted: ReadonlySet<string>;
}

const NOTHING: Visibility = { agents: new Set(), redacted: new Set() };
const visibilityOf = (scope: AuditScope): Visibility => ({ agents: new Set(scope.agentIds), redacted: new Set(scope.redactPolicyAgentIds) });

interface Stream {
  viewer: AuditStreamViewer;
  filter: LiveAuditFilter;
  sink: AuditStreamSink;
  visible: Visibility;
  /** Which visibility query last set `visible`; an older answer never overwrites a newer one. */
  visibleSeq: number;
}

/** Entry ids remembered to push each call once (retried publishes, repeated stages). */
const RECENT_IDS = 10_000;
/** Change events arriving within this window cause one visibility refresh. */
const REFRESH_DEBOUNCE_MS = 50;

/**
 * The live audit feed of one gateway replica. It subscribes to the bus once, lazily — when the
 * first stream opens — and lets go when the last one closes; every entry is matched against
 * each stream's visible agents and filters and serialised at most twice: as it is, and
 * without policy identities for viewers whose `AuditScope` redacts its agent (decision 022;
 * the filters see that redacted entry, so a `policy` filter never matches it).
 *
 * Visibility follows membership: an `agent.changed` event (approvals, rejections, removals,
 * deleted agents all publish one) refreshes every stream's visible agents within
 * ~`REFRESH_DEBOUNCE_MS` plus one query, and every `tickMs` (the heartbeat) they are refreshed
 * anyway — change events are fire-and-forget, so the tick bounds how long a lost one matters —
 * and each stream's dashboard session is re-checked: a session that ended (logout, expiry,
 * idle) ends its streams.
 */
export function createAuditStreamHub(deps: {
  bus: Pick<Bus, 'onAuditEntry' | 'onChange'>;
  db: Database;
  auth: Pick<AuthService, 'listSessions'>;
  /** An entry as the stream shows it (the REST API's shape), as JSON. */
  serialise(entry: AuditEntry): string;
  maxStreamsPerUser: number;
  /** Heartbeat and re-check interval. */
  tickMs: number;
  onError?: (err: unknown) => void;
}): AuditStreamHub {
  const streams = new Set<Stream>();
  /** Streams per user, counted from the moment `open` is called (so concurrent opens respect the cap). */
  const perUser = new Map<string, number>();
  const recent = new Set<string>();
  /** A ring of the ids in `recent`, oldest at `recentNext` once full. */
  const recentRing: string[] = new Array<string>(RECENT_IDS);
  let recentNext = 0;
  let seq = 0;
  let unsubscribe: (() => void) | undefined;
  let ticker: NodeJS.Timeout | undefined;
  let debounce: NodeJS.Timeout | undefined;
  let refreshing: Promise<void> | undefined;
  let refreshAgain = false;
  let sessionsAgain = false;

  const onEntry = (entry: AuditEntry) => {
    // An allowed call is published twice (stage `decision`, then `complete`, same id); a
    // denied one once, as complete. Pushing only complete records pushes each call once,
    // with its final duration; `recent` drops repeats of a publish.
    if (entry.stage === 'decision') return;
    if (recent.has(entry.id)) return;
    const evicted = recentRing[recentNext];
    if (evicted !== undefined) recent.delete(evicted);
    recentRing[recentNext] = entry.id;
    recentNext = (recentNext + 1) % RECENT_IDS;
    recent.add(entry.id);
    let json: string | undefined;
    let redacted: { entry: AuditEntry; json?: string } | undefined;
    for (const s of streams) {
      if (!s.visible.agents.has(entry.agentId)) continue;
      if (s.visible.redacted.has(entry.agentId)) {
        redacted ??= { entry: redactPolicyIdentities(entry) };
        if (!matchesLiveFilter(redacted.entry, s.filter)) continue;
        redacted.json ??= deps.serialise(redacted.entry);
        s.sink.entry(entry.id, redacted.json);
        continue;
      }
      if (!matchesLiveFilter(entry, s.filter)) continue;
      json ??= deps.serialise(entry);
      s.sink.entry(entry.id, json);
    }
  };

  /** Re-reads every stream's visible agents (and, on the tick, its session); one run at a time. */
  const refresh = (checkSessions: boolean): Promise<void> => {
    if (refreshing) { refreshAgain = true; sessionsAgain ||= checkSessions; return refreshing; }
    refreshing = (async () => {
      let withSessions = checkSessions;
      do {
        if (refreshAgain) { withSessions = sessionsAgain; sessionsAgain = false; }
        refreshAgain = false;
        const mine = ++seq;
        const userIds = [...new Set([...streams].map((s) => s.viewer.userId))];
        try {
          const scopes = await auditScopesOf(deps.db, userIds);
          for (const s of streams) {
            const scope = scopes.get(s.viewer.userId);
            if (scope && mine > s.visibleSeq) { s.visible = visibilityOf(scope); s.visibleSeq = mine; }
          }
          if (withSessions) {
            for (const userId of userIds) {
              const live = new Set((await deps.auth.listSessions(userId)).map((x) => x.id));
              for (const s of streams) if (s.viewer.userId === userId && !live.has(s.viewer.sessionId)) s.sink.end('session_ended');
            }
          }
        } catch (err) {
          // The database is unreachable: keep the sets we have; the next tick tries again.
          deps.onError?.(err);
        }
      } while (refreshAgain);
    })().finally(() => { refreshing = undefined; });
    return refreshing;
  };

  const onChange = (event: { kind: string }) => {
    if (event.kind !== 'agent.changed') return;
    debounce ??= setTimeout(() => { debounce = undefined; void refresh(false); }, REFRESH_DEBOUNCE_MS);
  };

  const start = () => {
    if (unsubscribe) return;
    const offEntries = deps.bus.onAuditEntry(onEntry);
    const offChanges = deps.bus.onChange(onChange);
    unsubscribe = () => { offEntries(); offChanges(); };
    ticker = setInterval(() => {
      for (const s of streams) s.sink.heartbeat();
      void refresh(true);
    }, deps.tickMs);
    ticker.unref();
  };

  const stopIfIdle = () => {
    if (perUser.size > 0 || !unsubscribe) return;
    unsubscribe();
    unsubscribe = undefined;
    clearInterval(ticker);
    clearTimeout(debounce);
    ticker = undefined;
    debounce = undefined;
  };

  const release = (userId: string) => {
    const n = (perUser.get(userId) ?? 1) - 1;
    if (n <= 0) perUser.delete(userId); else perUser.set(userId, n);
    stopIfIdle();
  };

  return {
    async open(viewer, filter, sink) {
      const count = perUser.get(viewer.userId) ?? 0;
      if (count >= deps.maxStreamsPerUser) {
        throw new ApiError('rate_limited', `At most ${deps.maxStreamsPerUser} live audit streams per user at once; close one first.`, { limit: deps.maxStreamsPerUser });
      }
      perUser.set(viewer.userId, count + 1);
      // Subscribed and registered (seeing nothing yet) before visibility is read, so an entry
      // published after `open` resolves is never missed, and a refresh that runs meanwhile
      // counts this stream too (the newer of the two answers wins).
      start();
      const stream: Stream = { viewer, filter, sink, visible: NOTHING, visibleSeq: 0 };
      streams.add(stream);
      let closed = false;
      const unregister = () => {
        if (closed) return;
        closed = true;
        streams.delete(stream);
        release(viewer.userId);
      };
      const mine = ++seq;
      try {
        const scope = (await auditScopesOf(deps.db, [viewer.userId])).get(viewer.userId)!;
        if (mine > stream.visibleSeq) { stream.visible = visibilityOf(scope); stream.visibleSeq = mine; }
      } catch (err) {
        unregister();
        throw err;
      }
      return unregister;
    },
    close() {
      for (const s of [...streams]) s.sink.end('shutdown');
      streams.clear();
      perUser.clear();
      stopIfIdle();
    },
    get size() { return streams.size; },
  };
}
