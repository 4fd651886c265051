import { z } from 'zod';
import { compilePolicy } from './compile.ts';

/**
 * A policy draft as `POST …/policies/preview` receives it (DESIGN.md §3). Unknown fields are
 * refused so a typo (`denyMesage`) does not silently vanish.
 */
export const policyDraftSchema = z.strictObject({
  name: z.string().trim().min(1, 'must not be empty'),
  policyKey: z.string().trim().min(1, 'must not be empty').optional(),
  service: z.string().min(1, 'must not be empty'),
  /** `require_approval`: a matching call waits for an owner's approval (decision 063). */
  effect: z.enum(['forbid', 'permit', 'require_approval']),
  tools: z.array(z.string().min(1)).default([]),
  tiers: z.array(z.string().min(1)).default([]),
  principal: z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('all_members') }),
    z.strictObject({ type: z.literal('members'), ids: z.array(z.string().min(1)) }),
  ]),
  /** Checked field by field when the draft compiles (`policyConditionsSchema`), so its errors carry `conditions.…` paths. */
  conditions: z.record(z.string(), z.unknown()).nullable().optional(),
  denyMessage: z.string().nullable().optional(),
  enabled: z.boolean().optional(),
  /** `shadow`: evaluated on live traffic and audited, never enforced (decision 061). Does not change the Cedar text. */
  mode: z.enum(['enforce', 'shadow']).optional(),
});

export type PolicyDraft = z.infer<typeof policyDraftSchema>;

export interface PolicyPreview {
  /** The draft's Cedar policy; empty when there are errors. */
  cedar: string;
  errors: string[];
  warnings: string[];
}

/** What a preview of a shadow draft says beside its Cedar (decision 061). */
export const SHADOW_PREVIEW_NOTE = 'shadow mode: this policy is evaluated on live traffic and recorded in the audit (shadowDecision), but it never changes a verdict until it is promoted';

/** What a preview of an approval policy says beside its Cedar (decision 063). */
export const APPROVAL_PREVIEW_NOTE = 'require_approval: a matching call is not forwarded until an owner of the agent approves it (then once, with the same arguments, within the approval window); a forbid that matches still denies it';

/** Policy key shown in a preview of a draft that has none yet. */
export const DRAFT_POLICY_KEY = 'draft';

/**
 * Compiles a draft (any JSON value) to Cedar without saving it: shape problems, catalog
 * mismatches and Cedar's strict validation against the catalog schema come back as
 * `errors`, one per problem, each naming the field (`conditions.args.0.path: …`, `cedar: …`).
 */
export function compilePreview(draft: unknown): PolicyPreview {
  const parsed = policyDraftSchema.safeParse(draft);
  if (!parsed.success) {
    const errors = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'draft'}: ${issue.message}`);
    return { cedar: '', errors, warnings: [] };
  }
  const { policyKey, mode, ...rest } = parsed.data;
  const compiled = compilePolicy({ ...rest, policyKey: policyKey ?? DRAFT_POLICY_KEY }, { mode: 'authoring' });
  const warnings = [...compiled.warnings];
  if (compiled.errors.length === 0 && rest.effect === 'require_approval') warnings.push(APPROVAL_PREVIEW_NOTE);
  if (compiled.errors.length === 0 && mode === 'shadow') warnings.push(SHADOW_PREVIEW_NOTE);
  return { cedar: compiled.cedar, errors: compiled.errors, warnings };
}
