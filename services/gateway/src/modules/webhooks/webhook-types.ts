/** Request headers as Node gives them: lower-case names; a repeated header may be an array. */
export type WebhookHeaders = Record<string, string | string[] | undefined>;

/** What a provider's verifier needs: the exact bytes received, never re-serialised JSON. */
export interface SignedRequest {
  rawBody: Buffer;
  headers: WebhookHeaders;
  /** The agent's plain webhook secret for this connector. */
  secret: string;
  /** Our clock, in milliseconds since the epoch. */
  nowMs: number;
}

/**
 * The verdict of a signature check. `failure` says which check failed in general terms
 * (missing header, stale timestamp, no match) and never contains a secret or a signature:
 * it becomes the message of the 401.
 */
export type Verification = { ok: true } | { ok: false; failure: string };

/**
 * An entity as one event reports it. Events often carry only part of an entity (a rename
 * carries the id and the new name, an archive only the id): `attributes` are merged over the
 * stored ones, and without a `name` the stored name is kept — or, for an entity we have not
 * harvested, nothing is stored (we would not know what to call it; the next harvest brings it).
 */
export interface ReportedEntity {
  id: string;
  name?: string;
  attributes: Record<string, unknown>;
}

/** One change to an agent's harvested entities of one type (`catalog.entityTypes`). */
export type EntityChange =
  | { op: 'upsert'; type: string; entities: ReportedEntity[] }
  | { op: 'remove'; type: string; ids: string[] };

/** What a verified payload means for us. `event` names the provider's event kind, for logs. */
export type WebhookOutcome =
  | { kind: 'changes'; event: string; changes: EntityChange[] }
  | { kind: 'ignored'; event: string }
  /** Slack's `url_verification`: answer the challenge, change nothing. */
  | { kind: 'challenge'; challenge: string };

/** A stored entity's display fields, as a provider needs them to name a related entity. */
export interface StoredEntity { name: string; attributes: Record<string, unknown> }

/** Read access to the agent's harvested entities of this connector (the webhook's own agent). */
export interface StoredEntities {
  /** The stored entities of `type` among `ids`, by id; ids not stored are absent. */
  get(type: string, ids: string[]): Promise<Map<string, StoredEntity>>;
}

/** One upstream's webhook dialect: how it signs and what its events mean. */
export interface WebhookProvider {
  verify(request: SignedRequest): Verification;
  /**
   * Maps a verified, parsed JSON payload to entity changes. Unknown event kinds are
   * `ignored`; a known kind with a malformed payload throws `ApiError('invalid_request')`.
   */
  interpret(payload: unknown, stored: StoredEntities): Promise<WebhookOutcome>;
}
