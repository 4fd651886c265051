import { z } from 'zod';
import { policyConditionsSchema, type PolicyConditions, type schema } from '@portcullis/core';

/** Control characters (NUL above all: Postgres text and jsonb cannot hold it) are refused, not stored. */
const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;
const text = (max: number) => z.string().trim().max(max).regex(NO_CONTROL_CHARS, 'must not contain control characters');

/** Keys starting with this belong to the PDP's built-in policies (`portcullis.base`, …). */
export const RESERVED_KEY_PREFIX = 'portcullis.';

/**
 * A policy key: the Cedar `@id` and the name audit entries list in `matchedPolicyIds`. Kept to
 * characters that read well in a URL, a CSV cell and a Cedar annotation.
 */
export const policyKeySchema = z.string().trim().min(1, 'must not be empty').max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'letters, digits, ".", "_", ":" and "-", starting with a letter or digit')
  .refine((key) => !key.toLowerCase().startsWith(RESERVED_KEY_PREFIX), `must not start with "${RESERVED_KEY_PREFIX}" (reserved for built-in policies)`);

/** `require_approval`: a matching call waits for an owner's approval, then goes through once (decision 063). */
export const policyEffectSchema = z.enum(['forbid', 'permit', 'require_approval']);
export type PolicyEffect = z.infer<typeof policyEffectSchema>;
export const policyTierSchema = z.enum(['read', 'write', 'destructive']);
/** `shadow`: evaluated on live traffic and audited, never enforced (decision 061). */
export const policyModeSchema = z.enum(['enforce', 'shadow']);
export type PolicyMode = z.infer<typeof policyModeSchema>;

export const policyPrincipalSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('all_members') }),
  z.strictObject({ type: z.literal('members'), ids: z.array(z.string().uuid('must be a member id (UUID)')).min(1, 'list at least one member').max(1_000) }),
]);

/**
 * Body of `POST …/policies` and `PUT …/policies/:policyId`, and the draft of preview and
 * simulate (DESIGN.md §3). Catalog membership of service/tools and agent membership of
 * `principal.ids` are checked by the service (they need the catalog and the database).
 */
export const policyBodySchema = z.strictObject({
  name: text(200).min(1, 'must not be empty'),
  policyKey: policyKeySchema.optional(),
  service: z.string().trim().min(1, 'must not be empty').max(64),
  effect: policyEffectSchema,
  tools: z.array(z.string().trim().min(1, 'must not be empty').max(200)).max(500).optional(),
  tiers: z.array(policyTierSchema).max(3).optional(),
  principal: policyPrincipalSchema,
  conditions: policyConditionsSchema.optional(),
  denyMessage: text(1_000).nullable().optional(),
  enabled: z.boolean().optional(),
  /** Omitted: `enforce` on create, the current mode on update (decision 061). */
  mode: policyModeSchema.optional(),
});

export type PolicyBody = z.infer<typeof policyBodySchema>;
export type PolicyPrincipal = schema.PolicyPrincipal;

/**
 * What a policy says, normalised: the snapshot a version stores and the draft the PDP
 * compiles (the PDP's `policyDraftSchema` accepts exactly these fields).
 */
export interface PolicyContent {
  policyKey: string;
  name: string;
  service: string;
  effect: PolicyEffect;
  /** In catalog order, no duplicates. */
  tools: string[];
  /** In tier order (read, write, destructive), no duplicates. */
  tiers: Array<'read' | 'write' | 'destructive'>;
  principal: PolicyPrincipal;
  conditions: PolicyConditions;
  denyMessage: string | null;
  enabled: boolean;
  mode: PolicyMode;
}

/** A snapshot as read back from `policy_versions` (older rows are re-validated with this). */
export const policyContentSchema = z.object({
  policyKey: z.string().min(1),
  name: z.string().min(1),
  service: z.string().min(1),
  effect: policyEffectSchema,
  tools: z.array(z.string()).default([]),
  tiers: z.array(policyTierSchema).default([]),
  principal: policyPrincipalSchema,
  conditions: policyConditionsSchema.default({}),
  denyMessage: z.string().nullable().default(null),
  enabled: z.boolean().default(true),
  /** Snapshots from before shadow policies have none: they were enforced. */
  mode: policyModeSchema.default('enforce'),
});

/** A policy as the REST API shows it: every field of the spec's list table, plus what the editor needs. */
export interface PolicyView extends Omit<PolicyContent, 'conditions'> {
  id: string;
  /** Every tool the policy covers, in catalog order: `listedTools` plus the tools of `tiers` (all the service's when both are empty). */
  tools: string[];
  /** The tools the policy names one by one, as written (the body's `tools`); `tiers` is as written too. */
  listedTools: string[];
  conditions: PolicyConditions;
  /** Number of the version in force (1 after create); null for a row that has no version yet. */
  version: number | null;
  currentVersionId: string | null;
  /** Audit entries that matched this policy; null when the audit service did not answer (decision 012). */
  triggerCount: number | null;
  /** Newest such entry's time; null when never matched or when the audit service did not answer. */
  lastTriggered: string | null;
  /** When the policy was last put in shadow; null while it is enforced (decision 061). */
  shadowSince: string | null;
  createdAt: string;
  updatedAt: string;
}

export type PolicyChange = 'create' | 'update' | 'toggle' | 'delete' | 'restore' | 'promote';

/** `GET …/policies/:policyId/shadow`: what the shadow policy would have changed since `shadowSince` (decision 062). */
export interface ShadowResultsView {
  policyId: string;
  shadowSince: string;
  /** Calls since `shadowSince` evaluated with the agent's shadow policies. */
  evaluated: number;
  /** Of those, the calls whose shadow verdict this policy decided. */
  matched: number;
  allowToDeny: number;
  denyToAllow: number;
  /** Newest matched call; null when none. */
  lastMatched: string | null;
  samples: Array<{ entryId: string; timestamp: string; memberId: string; memberName: string; service: string; tool: string; decision: 'ALLOW' | 'DENY'; shadowDecision: 'ALLOW' | 'DENY' }>;
}

/** One entry of `GET …/policies/:policyId/versions`. */
export interface PolicyVersionView {
  id: string;
  version: number;
  change: PolicyChange;
  snapshot: Record<string, unknown>;
  cedar: string;
  author: { id: string; email: string } | null;
  createdAt: string;
}

export type PolicySortKey = 'name' | 'policyKey' | 'service' | 'effect' | 'enabled' | 'createdAt' | 'updatedAt';

/** The filters, order and page of `GET /api/agents/:id/policies`, already validated. */
export interface PolicyListQuery {
  search?: string | undefined;
  service?: string | undefined;
  effect?: PolicyEffect | undefined;
  enabled?: boolean | undefined;
  mode?: PolicyMode | undefined;
  sortBy: PolicySortKey;
  sortDir: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** Body of `POST …/policies/simulate` once validated. */
export interface SimulateInput {
  draft: PolicyBody;
  replacePolicyId?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  limit?: number | undefined;
}
