import { randomUUID } from 'node:crypto';
import { and, count, eq } from 'drizzle-orm';
import {
  ApiError, checkDestination, deliverToSink, schema, sealSinkHeaders, sealSinkSecret, sinkEntryOf, sinkHeaderNames, sinkTargetOf, sinkUrlProblem,
  type AuditEntry, type Bus, type Database, type OutboundRule,
} from '@portcullis/core';

type SinkRow = typeof schema.auditSinks.$inferSelect;

/** Most sinks one agent may have (each is a consumer every entry of the agent is copied to). */
export const MAX_SINKS_PER_AGENT = 10;

/** A sink as the API shows it: never its secret nor its header values. */
export interface SinkView {
  id: string;
  agentId: string;
  kind: 'webhook' | 'otlp';
  name: string;
  url: string;
  enabled: boolean;
  headerNames: string[];
  lag: number | null;
  lastError: string | null;
  lastErrorAt: string | null;
  lastDeliveredAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export type NewSink =
  | { kind: 'webhook'; name: string; url: string; secret: string }
  | { kind: 'otlp'; name: string; url: string; headers?: Record<string, string> | undefined };

export interface SinkChange {
  name?: string | undefined;
  url?: string | undefined;
  enabled?: boolean | undefined;
  secret?: string | undefined;
  headers?: Record<string, string> | undefined;
}

/**
 * An agent's audit sinks (issue 20, decision 055): stored with their secrets sealed, each with
 * a durable consumer on the sink feed opened at creation (so it keeps entries from then on,
 * whether or not a worker runs yet) and removed with the sink. Callers check the owner role.
 */
export function createSinkService(o: {
  db: Database; bus: Pick<Bus, 'sinkFeed' | 'publishChange'>; secret: string;
  /** The outbound destination rule (decision 058): where a sink may point, and how Send test connects. */
  destinations: OutboundRule;
}) {
  /** The audit service's sink workers read the sinks again at once (decision 055). */
  const announce = (agentId: string) => o.bus.publishChange({ kind: 'agent.changed', agentId });
  /**
   * The URL's form, then the destination rule with the name resolved now. A name that does not
   * resolve yet is taken (a collector being set up): every delivery checks the rule again.
   */
  const checkUrl = async (url: string) => {
    const problem = sinkUrlProblem(url);
    if (problem) throw new ApiError('invalid_request', `url ${problem}.`, { field: 'url' });
    const checked = await checkDestination(url, o.destinations);
    if (!checked.ok && checked.problem !== 'unresolved') throw new ApiError('invalid_request', `url ${checked.message}.`, { field: 'url' });
  };

  const viewOf = async (row: SinkRow): Promise<SinkView> => ({
    id: row.id,
    agentId: row.agentId,
    kind: row.kind,
    name: row.name,
    url: row.url,
    enabled: row.enabled,
    headerNames: row.kind === 'otlp' ? sinkHeaderNames(o.secret, row.headersSealed) : [],
    lag: (await o.bus.sinkFeed.lag(row.id).catch(() => undefined)) ?? null,
    lastError: row.lastError,
    lastErrorAt: row.lastErrorAt?.toISOString() ?? null,
    lastDeliveredAt: row.lastDeliveredAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  });

  const load = async (agentId: string, sinkId: string): Promise<SinkRow> => {
    const [row] = await o.db.select().from(schema.auditSinks).where(and(eq(schema.auditSinks.id, sinkId), eq(schema.auditSinks.agentId, agentId)));
    if (!row) throw new ApiError('not_found', 'Sink not found.');
    return row;
  };

  return {
    async list(agentId: string): Promise<SinkView[]> {
      const rows = await o.db.select().from(schema.auditSinks).where(eq(schema.auditSinks.agentId, agentId)).orderBy(schema.auditSinks.createdAt);
      return Promise.all(rows.map(viewOf));
    },

    async create(agentId: string, userId: string, input: NewSink): Promise<SinkView> {
      await checkUrl(input.url);
      const [existing] = await o.db.select({ n: count() }).from(schema.auditSinks).where(eq(schema.auditSinks.agentId, agentId));
      if ((existing?.n ?? 0) >= MAX_SINKS_PER_AGENT) throw new ApiError('conflict', `An agent can have at most ${MAX_SINKS_PER_AGENT} sinks; delete one first.`);
      const [row] = await o.db.insert(schema.auditSinks).values({
        agentId, kind: input.kind, name: input.name, url: input.url, createdBy: userId,
        secretSealed: input.kind === 'webhook' ? sealSinkSecret(o.secret, input.secret) : null,
        headersSealed: input.kind === 'otlp' && input.headers && Object.keys(input.headers).length > 0 ? sealSinkHeaders(o.secret, input.headers) : null,
      }).returning();
      try {
        await o.bus.sinkFeed.open(row!.id, agentId);
      } catch {
        await o.db.delete(schema.auditSinks).where(eq(schema.auditSinks.id, row!.id));
        throw new ApiError('unavailable', 'The message bus cannot be reached, so the sink was not created; try again shortly.');
      }
      announce(agentId);
      return viewOf(row!);
    },

    async update(agentId: string, sinkId: string, change: SinkChange): Promise<SinkView> {
      const row = await load(agentId, sinkId);
      if (change.url !== undefined) await checkUrl(change.url);
      if (change.secret !== undefined && row.kind !== 'webhook') throw new ApiError('invalid_request', 'secret is for webhook sinks; an OTLP sink takes headers.', { field: 'secret' });
      if (change.headers !== undefined && row.kind !== 'otlp') throw new ApiError('invalid_request', 'headers are for OTLP sinks; a webhook sink takes a secret.', { field: 'headers' });
      const [updated] = await o.db.update(schema.auditSinks).set({
        ...(change.name !== undefined ? { name: change.name } : {}),
        ...(change.url !== undefined ? { url: change.url } : {}),
        ...(change.enabled !== undefined ? { enabled: change.enabled } : {}),
        ...(change.secret !== undefined ? { secretSealed: sealSinkSecret(o.secret, change.secret) } : {}),
        ...(change.headers !== undefined ? { headersSealed: Object.keys(change.headers).length > 0 ? sealSinkHeaders(o.secret, change.headers) : null } : {}),
        updatedAt: new Date(),
      }).where(eq(schema.auditSinks.id, row.id)).returning();
      announce(agentId);
      return viewOf(updated!);
    },

    async remove(agentId: string, sinkId: string): Promise<void> {
      const row = await load(agentId, sinkId);
      await o.db.delete(schema.auditSinks).where(eq(schema.auditSinks.id, row.id));
      announce(agentId);
      // Its undelivered entries go with its consumer. Should the bus not answer, the consumer stays
      // behind, keeping the agent's entries until the stream's max age; the sink is gone either way.
      await o.bus.sinkFeed.remove(row.id).catch(() => undefined);
    },

    /**
     * Sends one made-up entry (tool `portcullis__sink_test`) now, marked as a test; says whether
     * the sink took it — the status or the failure's class only (decision 058), so Send test
     * cannot read an internal service's answer nor tell one kind of closed port from another.
     */
    async test(agentId: string, sinkId: string, agentName: string): Promise<{ delivered: boolean; error: string | null }> {
      const row = await load(agentId, sinkId);
      const entry: AuditEntry = {
        id: randomUUID(), timestamp: new Date().toISOString(), agentId, agentName, memberId: '', memberName: 'Portcullis sink test', memberKeyId: '',
        service: 'portcullis', tool: 'portcullis__sink_test', action: '', resource: '', callerIp: '', toolArgs: {}, decision: 'ALLOW',
        reason: 'A test entry sent from the dashboard; no call was made', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [],
        durationMs: 0, principal: '',
      };
      try {
        await deliverToSink(sinkTargetOf(o.secret, row), [sinkEntryOf(entry)], o.destinations, { test: true });
        return { delivered: true, error: null };
      } catch (err) {
        return { delivered: false, error: err instanceof Error ? err.message : String(err) };
      }
    },
  };
}
