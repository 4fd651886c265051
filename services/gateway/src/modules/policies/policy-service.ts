import * as grpc from '@grpc/grpc-js';
import { ApiError, toolsCovered, type Bus, type Database } from '@portcullis/core';
import type { AuditClient } from '../../clients/audit-client.ts';
import type { PolicyClient, SimulateResponse } from '../../clients/policy-client.ts';
import { loadAgentAccess, requireOwner, type AgentAccess } from '../agents/agent-access.ts';
import type { SignedIn } from '../agents/agent-service.ts';
import { catalogIssues, contentOf, fieldOfCompileError, principalIssues, slugOf, uniqueKey, type PolicyIssue } from './policy-content.ts';
import { createPolicyRepo, type CommittedChange, type PolicyRow } from './policy-repo.ts';
import {
  policyBodySchema, policyContentSchema,
  type PolicyBody, type PolicyContent, type PolicyListQuery, type PolicyVersionView, type PolicyView, type ShadowResultsView, type SimulateInput,
} from './policy-types.ts';

export interface PolicyPreviewView { cedar: string; errors: string[]; warnings: string[] }

/** What the router needs from the PDP and the audit service: two calls each way, no more. */
export interface PolicyServiceDeps {
  db: Database;
  bus: Pick<Bus, 'publishChange'>;
  policy: Pick<PolicyClient, 'preview' | 'simulate'>;
  audit: Pick<AuditClient, 'policyTriggers' | 'shadowResults'>;
}

const isGrpcError = (err: unknown): err is grpc.ServiceError =>
  typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'number' && 'details' in err;

/**
 * A failure of the PDP as the REST caller sees it: INVALID_ARGUMENT and FAILED_PRECONDITION
 * are the request's fault (400); anything else — UNAVAILABLE, DEADLINE_EXCEEDED,
 * UNIMPLEMENTED (a PDP that does not serve the call yet) — is 503 `unavailable`.
 */
export function apiErrorOfPdp(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (isGrpcError(err) && (err.code === grpc.status.INVALID_ARGUMENT || err.code === grpc.status.FAILED_PRECONDITION)) {
    return new ApiError('invalid_request', err.details || 'The policy decision point refused the request.');
  }
  if (isGrpcError(err) && err.code === grpc.status.UNIMPLEMENTED) {
    return new ApiError('unavailable', 'The policy decision point does not serve this yet; try again after it is upgraded.');
  }
  return new ApiError('unavailable', 'The policy decision point is unavailable; try again shortly.');
}

const invalid = (issue: PolicyIssue, prefix = '') =>
  new ApiError('invalid_request', issue.message, { field: `${prefix}${issue.field}`, in: 'body' });

/** The record of a row, as a version snapshot and the PDP hold it. */
export function contentOfRow(row: PolicyRow): PolicyContent {
  return {
    policyKey: row.policyKey,
    name: row.name,
    service: row.service,
    effect: row.effect,
    tools: row.tools,
    tiers: row.tiers as PolicyContent['tiers'],
    principal: row.principal,
    conditions: row.conditions as PolicyContent['conditions'],
    denyMessage: row.denyMessage,
    enabled: row.enabled,
    mode: row.mode === 'shadow' ? 'shadow' : 'enforce',
  };
}

type Triggers = Map<string, { count: number; lastTriggered: string }> | null;

function toView(row: PolicyRow, version: number | null, triggers: Triggers): PolicyView {
  const hit = triggers?.get(row.id);
  return {
    id: row.id,
    ...contentOfRow(row),
    tools: toolsCovered(row.service, row.tools, row.tiers),
    listedTools: row.tools,
    version,
    currentVersionId: row.currentVersionId,
    triggerCount: triggers ? hit?.count ?? 0 : null,
    lastTriggered: hit?.lastTriggered ?? null,
    shadowSince: row.mode === 'shadow' && row.shadowSince ? row.shadowSince.toISOString() : null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/**
 * Policies of one agent: list, create, update, toggle, delete, history and restore, plus
 * preview and simulate through the PDP. Owner-only throughout (decision 012). Every change
 * is validated (schema, catalog, members), compiled by the PDP's Preview (a record that does
 * not compile is never stored), committed with its version and the agent's `policy_version`
 * bump in one transaction, then announced as `policy.changed`.
 */
/** POST …/policies/simulate's answer: the PDP's, each sample with its entry's time, member and tool (decision 039). */
export interface SimulationView extends Omit<SimulateResponse, 'samples' | 'draftMode' | 'enforcedChanges' | 'toApproval' | 'fromApproval'> {
  /** Calls that would become approval-required (held for an owner), and that would stop being so (decision 063). */
  toApproval: number;
  fromApproval: number;
  samples: Array<{ entryId: string; before: string; after: string; reason: string; timestamp: string; memberId: string; memberName: string; service: string; tool: string }>;
  /** The draft's mode: `shadow` = the counts are what it would change once promoted; saved in shadow it changes no verdict (decision 061). */
  mode: 'enforce' | 'shadow';
  /** Calls whose enforced verdict saving the draft as it is changes (0 for a shadow draft unless it replaces an enforced policy). */
  enforcedChanges: number;
}

export function createPolicyService(deps: PolicyServiceDeps) {
  const repo = createPolicyRepo(deps.db);

  async function ownerAccess(agentId: string, user: SignedIn): Promise<AgentAccess> {
    const access = await loadAgentAccess(deps.db, agentId, user.id);
    requireOwner(access);
    return access;
  }

  /** One audit call for a page of policies; null (not an error) when the audit service does not answer. */
  async function triggersOf(agentId: string, policyIds: string[]): Promise<Triggers> {
    if (policyIds.length === 0) return new Map();
    try {
      const { triggers } = await deps.audit.policyTriggers({ agentId, policyDbIds: policyIds });
      return new Map(triggers.map((t) => [t.policyDbId, { count: Number(t.count), lastTriggered: t.lastTriggered }]));
    } catch {
      return null;
    }
  }

  async function viewOf(agentId: string, row: PolicyRow, version: number | null): Promise<PolicyView> {
    return toView(row, version, await triggersOf(agentId, [row.id]));
  }

  /** Schema-level checks done, now what needs the catalog and the agent's members; throws the first problem. */
  async function issuesOf(agentId: string, body: Pick<PolicyBody, 'service' | 'tools' | 'principal'>): Promise<PolicyIssue[]> {
    const catalog = catalogIssues(body);
    const ids = body.principal.type === 'members' ? body.principal.ids : [];
    return [...catalog, ...principalIssues(body, await repo.memberIdsAmong(agentId, ids))];
  }

  async function assertValid(agentId: string, body: Pick<PolicyBody, 'service' | 'tools' | 'principal'>, prefix = ''): Promise<void> {
    const [first] = await issuesOf(agentId, body);
    if (first) throw invalid(first, prefix);
  }

  /** The record's Cedar text from the PDP; 400 listing the PDP's errors when it does not compile. */
  async function compile(agentId: string, content: PolicyContent): Promise<string> {
    let preview: PolicyPreviewView;
    try {
      preview = await deps.policy.preview({ agentId, draftJson: JSON.stringify(content) });
    } catch (err) {
      throw apiErrorOfPdp(err);
    }
    if (preview.errors.length > 0) {
      throw new ApiError('invalid_request', `The policy does not compile: ${preview.errors.join('; ')}`, {
        field: fieldOfCompileError(preview.errors[0]!), in: 'body', errors: preview.errors,
      });
    }
    return preview.cedar;
  }

  function announce(agentId: string, committed: CommittedChange): void {
    deps.bus.publishChange({ kind: 'policy.changed', agentId, policyVersion: committed.policyVersion });
  }

  async function committedView(agentId: string, committed: CommittedChange): Promise<PolicyView> {
    announce(agentId, committed);
    return viewOf(agentId, committed.policy!, committed.version.version);
  }

  /** Cedar of an unchanged record (toggle, delete): the newest version's, else compiled now. */
  async function cedarOf(agentId: string, row: PolicyRow): Promise<string> {
    return (await repo.latestCedar(row.id)) ?? compile(agentId, contentOfRow(row));
  }

  async function existing(agentId: string, policyId: string) {
    const found = await repo.get(agentId, policyId);
    if (!found) throw new ApiError('not_found', 'Policy not found.');
    return found;
  }

  async function toggle(agentId: string, policyId: string, user: SignedIn): Promise<PolicyView> {
    const { policy } = await existing(agentId, policyId);
    const cedar = await cedarOf(agentId, policy);
    const committed = await repo.replace({
      agentId, policyId, cedar, authorUserId: user.id, change: 'toggle',
      content: (current) => ({ ...contentOfRow(current), enabled: !current.enabled }),
    });
    return committedView(agentId, committed);
  }

  return {
    async list(agentId: string, user: SignedIn, query: PolicyListQuery): Promise<{ policies: PolicyView[]; total: number }> {
      await ownerAccess(agentId, user);
      const { rows, total } = await repo.list(agentId, query);
      const triggers = await triggersOf(agentId, rows.map((r) => r.policy.id));
      return { policies: rows.map((r) => toView(r.policy, r.version, triggers)), total };
    },

    async create(agentId: string, user: SignedIn, body: PolicyBody): Promise<PolicyView> {
      await ownerAccess(agentId, user);
      await assertValid(agentId, body);
      let policyKey = body.policyKey;
      if (policyKey === undefined) {
        const base = slugOf(body.name);
        policyKey = uniqueKey(base, await repo.keysLike(agentId, base));
      } else if (await repo.keyTaken(agentId, policyKey)) {
        throw new ApiError('conflict', `Another policy of this agent already has the key "${policyKey}".`, { field: 'policyKey', value: policyKey });
      }
      const content = contentOf(body, policyKey, true);
      const cedar = await compile(agentId, content);
      return committedView(agentId, await repo.create({ agentId, content, cedar, authorUserId: user.id, change: 'create' }));
    },

    /** Replaces the record; an omitted `policyKey` or `enabled` keeps the current one. */
    async update(agentId: string, policyId: string, user: SignedIn, body: PolicyBody): Promise<PolicyView> {
      await ownerAccess(agentId, user);
      const { policy } = await existing(agentId, policyId);
      await assertValid(agentId, body);
      const policyKey = body.policyKey ?? policy.policyKey;
      if (await repo.keyTaken(agentId, policyKey, policyId)) {
        throw new ApiError('conflict', `Another policy of this agent already has the key "${policyKey}".`, { field: 'policyKey', value: policyKey });
      }
      const content = contentOf(body, policyKey, policy.enabled, contentOfRow(policy).mode);
      const cedar = await compile(agentId, content);
      return committedView(agentId, await repo.replace({ agentId, policyId, content, cedar, authorUserId: user.id, change: 'update' }));
    },

    /**
     * A shadow policy starts being enforced: one new `promote` version with the same content
     * in `enforce` mode (the Cedar text does not change). 409 when it is not in shadow.
     */
    async promote(agentId: string, policyId: string, user: SignedIn): Promise<PolicyView> {
      await ownerAccess(agentId, user);
      const { policy } = await existing(agentId, policyId);
      if (policy.mode !== 'shadow') throw new ApiError('conflict', 'The policy is not in shadow mode; it is enforced already.', { field: 'mode', value: policy.mode });
      const cedar = await cedarOf(agentId, policy);
      const committed = await repo.replace({
        agentId, policyId, cedar, authorUserId: user.id, change: 'promote',
        content: (current) => {
          // Checked again on the locked row: a promotion racing another one is refused, not recorded twice.
          if (current.mode !== 'shadow') throw new ApiError('conflict', 'The policy is not in shadow mode; it is enforced already.', { field: 'mode', value: current.mode });
          return { ...contentOfRow(current), mode: 'enforce' };
        },
      });
      return committedView(agentId, committed);
    },

    /** What a shadow policy would have changed since it was put in shadow (decision 062); 409 when it is not in shadow. */
    async shadowResults(agentId: string, policyId: string, user: SignedIn, samples: number): Promise<ShadowResultsView> {
      await ownerAccess(agentId, user);
      const { policy } = await existing(agentId, policyId);
      if (policy.mode !== 'shadow' || !policy.shadowSince) {
        throw new ApiError('conflict', 'The policy is not in shadow mode: it has no shadow results.', { field: 'mode', value: policy.mode });
      }
      const shadowSince = policy.shadowSince.toISOString();
      let result;
      try {
        result = await deps.audit.shadowResults({ agentId, policyDbId: policy.id, since: shadowSince, sampleLimit: samples });
      } catch {
        throw new ApiError('unavailable', 'The audit service is unavailable; try again shortly.');
      }
      const verdict = (value: string): 'ALLOW' | 'DENY' => (value === 'ALLOW' ? 'ALLOW' : 'DENY');
      return {
        policyId: policy.id,
        shadowSince,
        evaluated: Number(result.evaluated),
        matched: Number(result.matched),
        allowToDeny: Number(result.allowToDeny),
        denyToAllow: Number(result.denyToAllow),
        lastMatched: result.lastMatched || null,
        samples: (result.samples ?? []).map((s) => ({
          entryId: s.entryId, timestamp: s.timestamp, memberId: s.memberId, memberName: s.memberName,
          service: s.service, tool: s.tool, decision: verdict(s.decision), shadowDecision: verdict(s.shadowDecision),
        })),
      };
    },

    async toggle(agentId: string, policyId: string, user: SignedIn): Promise<PolicyView> {
      await ownerAccess(agentId, user);
      return toggle(agentId, policyId, user);
    },

    /** `POST /api/policies/:policyId/toggle`: the same, for the owner of the policy's agent; others get 404. */
    async toggleById(policyId: string, user: SignedIn): Promise<PolicyView> {
      const agentId = await repo.agentOf(policyId);
      if (!agentId) throw new ApiError('not_found', 'Policy not found.');
      let access: AgentAccess;
      try {
        access = await loadAgentAccess(deps.db, agentId, user.id);
      } catch (err) {
        // An outsider learns nothing, not even that the policy exists.
        if (err instanceof ApiError && err.code === 'not_found') throw new ApiError('not_found', 'Policy not found.');
        throw err;
      }
      requireOwner(access);
      return toggle(agentId, policyId, user);
    },

    async remove(agentId: string, policyId: string, user: SignedIn): Promise<void> {
      await ownerAccess(agentId, user);
      await existing(agentId, policyId);
      // The version that closes the history keeps the Cedar the policy last had.
      const cedar = (await repo.latestCedar(policyId)) ?? '';
      announce(agentId, await repo.remove({ agentId, policyId, cedar, authorUserId: user.id, snapshotOf: contentOfRow }));
    },

    async versions(agentId: string, policyId: string, user: SignedIn): Promise<{ versions: PolicyVersionView[] }> {
      await ownerAccess(agentId, user);
      const rows = await repo.versions(agentId, policyId);
      if (rows.length === 0 && !(await repo.get(agentId, policyId))) throw new ApiError('not_found', 'Policy not found.');
      return {
        versions: rows.map(({ version: v, author }) => ({
          id: v.id,
          version: v.version,
          change: v.change,
          snapshot: v.snapshot,
          cedar: v.cedar,
          author: author ? { id: author.id, email: author.email } : null,
          createdAt: v.createdAt.toISOString(),
        })),
      };
    },

    /**
     * A new version whose content equals version `versionId`'s snapshot; recreates the policy
     * (same id) when it was deleted. The content is checked and compiled again: the catalog
     * or the members may have changed since.
     */
    async restore(agentId: string, policyId: string, versionId: string, user: SignedIn): Promise<PolicyView> {
      await ownerAccess(agentId, user);
      const version = await repo.version(agentId, policyId, versionId);
      if (!version) throw new ApiError('not_found', 'Policy version not found.');
      const parsed = policyContentSchema.safeParse(version.snapshot);
      if (!parsed.success) {
        throw new ApiError('invalid_request', 'This version\'s snapshot can no longer be restored.', { field: 'versionId', in: 'params' });
      }
      const snapshot = parsed.data;
      const [issue] = await issuesOf(agentId, snapshot);
      if (issue) throw new ApiError('invalid_request', `The version cannot be restored: ${issue.message}`, { field: issue.field, in: 'snapshot' });
      const content = contentOf(snapshot, snapshot.policyKey, snapshot.enabled);
      const current = await repo.get(agentId, policyId);
      if (await repo.keyTaken(agentId, content.policyKey, policyId)) {
        throw new ApiError('conflict', `Another policy of this agent now has the key "${content.policyKey}".`, { field: 'policyKey', value: content.policyKey });
      }
      const cedar = await compile(agentId, content);
      const committed = current
        ? await repo.replace({ agentId, policyId, content, cedar, authorUserId: user.id, change: 'restore' })
        : await repo.create({ agentId, id: policyId, content, cedar, authorUserId: user.id, change: 'restore' });
      return committedView(agentId, committed);
    },

    /**
     * Compiles a draft without saving it. A draft with problems is still answered (200):
     * schema problems alone (no PDP call), else the member problems found here plus the PDP's.
     * A tool or service the catalog does not have is 400 naming the field, as create and update
     * answer it (decision 068).
     */
    async preview(agentId: string, user: SignedIn, draft: unknown): Promise<PolicyPreviewView> {
      await ownerAccess(agentId, user);
      const parsed = policyBodySchema.safeParse(draft);
      if (!parsed.success) {
        return { cedar: '', errors: parsed.error.issues.map((i) => `${i.path.map(String).join('.') || 'draft'}: ${i.message}`), warnings: [] };
      }
      const body = parsed.data;
      // A tool or service the catalog does not have is refused as create refuses it: compiled,
      // the draft would drop the name and forbid the whole connector (decision 068).
      const [unknown] = catalogIssues(body);
      if (unknown) throw invalid(unknown);
      const own = (await issuesOf(agentId, body)).map((i) => `${i.field}: ${i.message}`);
      const content = contentOf(body, body.policyKey ?? slugOf(body.name), true);
      let preview: PolicyPreviewView;
      try {
        preview = await deps.policy.preview({ agentId, draftJson: JSON.stringify(content) });
      } catch (err) {
        throw apiErrorOfPdp(err);
      }
      return { cedar: preview.cedar, errors: [...new Set([...own, ...preview.errors])], warnings: preview.warnings };
    },

    /** Replays the agent's recent audit traffic against a draft (the PDP's Simulate). */
    async simulate(agentId: string, user: SignedIn, input: SimulateInput): Promise<SimulationView> {
      await ownerAccess(agentId, user);
      await assertValid(agentId, input.draft, 'draft.');
      let replaced: PolicyRow | undefined;
      if (input.replacePolicyId) {
        replaced = (await repo.get(agentId, input.replacePolicyId))?.policy;
        if (!replaced) throw new ApiError('invalid_request', 'replacePolicyId names no policy of this agent.', { field: 'replacePolicyId', in: 'body' });
      }
      const content = contentOf(input.draft, input.draft.policyKey ?? replaced?.policyKey ?? slugOf(input.draft.name), true);
      try {
        const result = await deps.policy.simulate({
          agentId,
          draftJson: JSON.stringify(content),
          replacePolicyId: input.replacePolicyId ?? '',
          from: input.from ?? '',
          to: input.to ?? '',
          limit: input.limit ?? 0,
        });
        return {
          evaluated: Number(result.evaluated),
          unchanged: Number(result.unchanged),
          allowToDeny: Number(result.allowToDeny),
          denyToAllow: Number(result.denyToAllow),
          toApproval: Number(result.toApproval ?? 0),
          fromApproval: Number(result.fromApproval ?? 0),
          samples: (result.samples ?? []).map((s) => ({
            entryId: s.entryId, before: s.before, after: s.after, reason: s.reason,
            timestamp: s.timestamp ?? '', memberId: s.memberId ?? '', memberName: s.memberName ?? '', service: s.service ?? '', tool: s.tool ?? '',
          })),
          ...(result.skipped !== undefined ? { skipped: Number(result.skipped) } : {}),
          ...(result.from ? { from: result.from } : {}),
          ...(result.to ? { to: result.to } : {}),
          mode: result.draftMode === 'shadow' ? 'shadow' : 'enforce',
          enforcedChanges: result.enforcedChanges !== undefined ? Number(result.enforcedChanges) : Number(result.allowToDeny) + Number(result.denyToAllow),
        };
      } catch (err) {
        throw apiErrorOfPdp(err);
      }
    },
  };
}

export type PolicyService = ReturnType<typeof createPolicyService>;
