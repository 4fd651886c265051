import { sql } from 'drizzle-orm';
import { index, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';

export type ToolSessionStatus = 'active' | 'terminated';

/**
 * An MCP tool session (`Mcp-Session-Id`), shared by every gateway replica: any replica serves
 * any request of a live session. `lastSeenAt` is written in batches, so it may lag a request
 * by a few seconds; a session idle past `TOOL_SESSION_IDLE_MINUTES` is expired.
 */
export const toolSessions = pgTable('tool_sessions', {
  id: text('id').primaryKey(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  /**
   * The member and key that opened it. Not foreign keys: a session outlives its member's
   * removal (and their keys' deletion), as the audit entries that name it do (decision 071).
   */
  memberId: uuid('member_id').notNull(),
  keyId: uuid('key_id').notNull(),
  /** The member's e-mail, written when the member is removed (until then it is read from `members`). */
  memberEmail: text('member_email'),
  clientName: text('client_name').notNull().default(''),
  clientVersion: text('client_version').notNull().default(''),
  protocolVersion: text('protocol_version').notNull().default(''),
  /**
   * A stateless (2026-07-28) client's session handle from `_meta` (`''` when it named none);
   * null for a session opened by `initialize`. Key, client name and handle name the stream
   * whose calls form one session (decision 032).
   */
  clientHandle: text('client_handle'),
  status: text('status').$type<ToolSessionStatus>().notNull().default('active'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  endedAt: timestamp('ended_at', { withTimezone: true }),
  /** Why it ended: `client` (DELETE), `reset` (an owner or the member), `expired` (idle), `key_rotated`, `key_revoked`, `member_removed`. */
  endReason: text('end_reason'),
}, (t) => [
  index('tool_sessions_agent_idx').on(t.agentId, t.createdAt),
  index('tool_sessions_member_idx').on(t.memberId, t.createdAt),
  // At most one live session per stateless stream, whichever replica opens it first.
  uniqueIndex('tool_sessions_stream_idx').on(t.keyId, t.clientName, t.clientHandle).where(sql`${t.status} = 'active' and ${t.clientHandle} is not null`),
]);
