import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { toAuditEntryMsg, type Bus, type Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import type { SessionEnds } from '../modules/auth/session-ends.ts';
import { createAuditStreamHub, type AuditStreamSink, type StreamEndReason } from '../modules/audit/audit-stream-hub.ts';
import { auditStreamQuerySchema, liveFilterOf } from '../modules/audit/audit-stream-filter.ts';
import { requireUser } from '../plugins/session-auth.ts';
import { toApiEntry } from './audit-router.ts';

/** How long a browser's EventSource waits before reconnecting (the SSE `retry` field). */
const RETRY_MS = 3_000;
/** An ended response the client does not read is cut off after this long, so shutdown never waits on it. */
const END_GRACE_MS = 2_000;

const endMessages: Record<StreamEndReason, string> = {
  overflow: 'The stream fell too far behind and was closed; reconnect, and fill the gap from GET /api/audit.',
  session_ended: 'The dashboard session has ended; sign in again.',
  shutdown: 'The server is shutting down; reconnect.',
};

/**
 * One SSE response. Frames go straight to the socket while it keeps up; once a write reports
 * a full buffer they wait in a queue of at most `queueLimit` frames until `drain`, and a client
 * that lets the queue overflow is sent a final `end` event (`overflow`) and disconnected — one
 * slow reader never holds more than its queue in memory, nor slows anyone else. Frames that
 * arrive before the headers are out (while visibility is being read) wait in the same queue.
 */
export class SseResponse implements AuditStreamSink {
  private started = false;
  private blocked = false;
  private finished = false;
  private endReason: StreamEndReason | undefined;
  private readonly pending: string[] = [];

  constructor(private readonly res: ServerResponse, private readonly queueLimit: number) {
    // A write racing a disconnect must not become an unhandled 'error' event.
    res.on('error', () => undefined);
    res.on('close', () => { this.finished = true; });
  }

  /** Sends the headers and whatever queued up meanwhile. */
  start(): void {
    if (this.finished) return;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // Reverse proxies (nginx) must pass events on at once, not buffer them.
      'x-accel-buffering': 'no',
    });
    this.started = true;
    this.res.write(`retry: ${RETRY_MS}\n: connected\n\n`);
    if (this.endReason) return this.finish(this.endReason);
    this.flush();
  }

  entry(id: string, json: string): void {
    this.event('entry', id, json);
  }

  /** One event frame (`json` is one line of JSON). */
  event(name: string, id: string, json: string): void {
    this.write(`event: ${name}\nid: ${id}\ndata: ${json}\n\n`);
  }

  heartbeat(): void {
    if (this.started && !this.blocked && !this.finished && !this.endReason) this.res.write(': keep-alive\n\n');
  }

  end(reason: StreamEndReason): void {
    if (this.endReason || this.finished) return;
    this.endReason = reason;
    this.pending.length = 0;
    if (this.started) this.finish(reason);
  }

  get ended(): boolean { return this.finished || this.endReason !== undefined; }

  private write(frame: string): void {
    if (this.finished || this.endReason) return;
    if (!this.started || this.blocked) {
      if (this.pending.length >= this.queueLimit) return this.end('overflow');
      this.pending.push(frame);
      return;
    }
    if (!this.res.write(frame)) this.block();
  }

  private block(): void {
    this.blocked = true;
    this.res.once('drain', () => this.flush());
  }

  private flush(): void {
    this.blocked = false;
    while (this.pending.length > 0 && !this.finished && !this.endReason) {
      if (!this.res.write(this.pending.shift()!)) return this.block();
    }
  }

  private finish(reason: StreamEndReason): void {
    if (this.finished) return;
    this.finished = true;
    this.res.end(`event: end\ndata: ${JSON.stringify({ reason, message: endMessages[reason] })}\n\n`);
    const cutoff = setTimeout(() => this.res.destroy(), END_GRACE_MS);
    cutoff.unref();
    this.res.once('close', () => clearTimeout(cutoff));
  }
}

/**
 * GET /api/audit/stream: server-sent events carrying each new audit entry the caller may see
 * (their `AuditScope`, with a trusted agent's policy identities hidden from its non-owner
 * members — decision 022) that passes GET /api/audit's filters, as
 * `event: entry`, `id: <entry id>`, `data: <the entry as GET /api/audit shows it>`. A comment
 * line every `tickMs` keeps proxies from closing an idle stream; the server ends a stream with
 * `event: end` (`data: {reason, message}`). Nothing is replayed: a client that reconnects
 * fills any gap from GET /api/audit. See docs/decisions/015-live-audit-stream.md.
 */
export async function auditStreamRoutes(fastify: FastifyInstance, options: {
  db: Database;
  bus: Pick<Bus, 'onAuditEntry' | 'onChange'>;
  auth: AuthService;
  maxStreamsPerUser: number;
  /** Heartbeat, and how often visibility and sessions are re-checked. */
  tickMs: number;
  /** Frames a slow client may have waiting before it is dropped. */
  queueLimit: number;
  /** Ends a stream the moment its dashboard session ends, on any replica (decision 068). */
  sessionEnds: Pick<SessionEnds, 'watch'>;
}) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const hub = createAuditStreamHub({
    bus: options.bus,
    db: options.db,
    auth: options.auth,
    serialise: (entry) => JSON.stringify(toApiEntry(toAuditEntryMsg(entry))),
    maxStreamsPerUser: options.maxStreamsPerUser,
    tickMs: options.tickMs,
    onError: (err) => app.log.warn({ err }, 'audit stream: visibility refresh failed'),
  });
  // preClose, not onClose: open streams would keep the server from closing at all.
  app.addHook('preClose', async () => { hub.close(); });

  app.get('/api/audit/stream', {
    schema: {
      tags: ['audit'],
      summary: 'Live audit entries (server-sent events), with the filters of GET /api/audit',
      description: 'A `text/event-stream`: `event: entry` / `id: <entry id>` / `data: <entry as GET /api/audit lists it>` for each new entry the caller may see; a `: keep-alive` comment every 15 s; `event: end` with `{reason, message}` (overflow, session_ended, shutdown) before the server closes it. No replay: fill gaps from GET /api/audit.',
      querystring: auditStreamQuerySchema,
    },
    // onRequest: an anonymous caller gets 401 before its query is even looked at.
    onRequest: requireUser(options.auth),
  }, async (request, reply) => {
    const user = request.user!;
    const sse = new SseResponse(reply.raw, options.queueLimit);
    let unregister: (() => void) | undefined;
    let unwatch: (() => void) | undefined;
    reply.raw.on('close', () => { unregister?.(); unwatch?.(); });
    // May throw 429 (too many streams): still an ordinary JSON error, nothing was sent yet.
    unregister = await hub.open({ userId: user.id, sessionId: user.sessionId }, liveFilterOf(request.query), sse);
    // Logout (here or on another replica) ends the stream at once, not at the next heartbeat.
    unwatch = options.sessionEnds.watch(user.sessionId, () => sse.end('session_ended'));
    reply.hijack();
    if (reply.raw.destroyed) { unregister(); unwatch(); return; }
    sse.start();
  });
}
