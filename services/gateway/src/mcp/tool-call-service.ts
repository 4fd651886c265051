import { performance } from 'node:perf_hooks';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { uuidv7 } from 'uuidv7';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  actionUid, AGENT_TYPE, counter, currentTraceHeaders, entityUid, getConnector, histogram, tracerOf, getTool, GATEWAY_ACTION_TYPE, NO_FORBID_MATCHED,
  principalUid, reasonWithoutPolicyNames, redactToolArgs, resourceOf, splitToolName, tracingEnabled,
  type AuditEntry, type AuthorizeResponse,
} from '@portcullis/core';
import type { PolicyClient } from '../clients/policy-client.ts';
import { UpstreamError, type UpstreamPool } from '../clients/upstream-pool.ts';
import { AuditUnavailable, type AuditPublisher } from '../modules/audit/audit-publisher.ts';
import type { MemberConnection, MemberContext } from '../modules/identity/member-context.ts';
import { hidesPolicyIdentities } from '../modules/audit/audit-scope.ts';
import { timed } from './stage-timing.ts';
import { ReauthRequired, type SealedTokens } from '../modules/connections/sealed-tokens.ts';
import { argsDigest } from '../modules/call-approvals/args-digest.ts';
import type { CallApprovalService } from '../modules/call-approvals/call-approval-service.ts';
import { APPROVAL_META_KEY } from '../modules/call-approvals/call-approval-types.ts';
import { mintRequestState, readRequestState } from '../modules/call-approvals/request-state.ts';

/** Whether a retry's `inputResponses` say the client declined or cancelled the URL elicitation. */
function answeredWithout(inputResponses: unknown): boolean {
  if (inputResponses === null || typeof inputResponses !== 'object') return false;
  const answer = (inputResponses as Record<string, unknown>)[APPROVAL_INPUT_KEY];
  const action = answer !== null && typeof answer === 'object' ? (answer as { action?: unknown }).action : undefined;
  return action === 'decline' || action === 'cancel';
}

export const POLICY_UNAVAILABLE = 'Policy service unavailable: the call was denied because no verdict could be obtained';
export const AUDIT_UNAVAILABLE = 'Audit log unavailable: the call was not forwarded because its audit record could not be stored';
/** A call that needs an owner's approval while the approval store cannot be reached (decision 063). */
export const APPROVALS_UNAVAILABLE = 'Approvals unavailable: this call needs an owner\'s approval and its request could not be read or recorded; it was not forwarded';
/** Appended to the reason of a write-ahead record: the call went upstream, its outcome is not known yet. */
export const OUTCOME_PENDING = 'outcome not recorded: forwarded upstream, no completion received';
/**
 * The reason of a call's intent (single-process mode, decision 070): the entry that stands for
 * the call if the process stops before its verdict reaches the local log. It was not forwarded.
 */
export const OUTCOME_UNDECIDED = 'Not forwarded: the process stopped before the verdict of this call was recorded; outcome not recorded';

export interface ToolCallRequest {
  name: string;
  args: Record<string, unknown>;
  sessionId: string | undefined;
  callerIp: string;
  /**
   * 2026-07-28 only (decision 063): whether the client declared `elicitation.url` (a held call
   * then gets `input_required` with a URL elicitation), and what a retry sent back.
   */
  approvalFlow?: { urlElicitation: boolean; requestState?: unknown; inputResponses?: unknown };
}

/** A 2026-07-28 `input_required` result (multi-round-trip request); only for clients that can take it. */
export interface InputRequiredResult {
  resultType: 'input_required';
  inputRequests: Record<string, { method: 'elicitation/create'; params: { mode: 'url'; message: string; url: string; elicitationId: string } }>;
  requestState: string;
  _meta: Record<string, unknown>;
  [key: string]: unknown;
}

/** The key of the URL elicitation in `inputRequests` / `inputResponses`. */
export const APPROVAL_INPUT_KEY = 'portcullis-approval';

const toolCalls = counter('portcullis_gateway_tool_calls_total', 'Tool calls through /mcp, by connector and decision', ['service', 'decision']);
const callDuration = histogram('portcullis_gateway_tool_call_duration_seconds', 'Whole tool-call time in the gateway, upstream included', ['decision']);
const authorizeDuration = histogram('portcullis_gateway_authorize_duration_seconds', 'Authorize round trips to the decision point, as the gateway sees them');
const auditRefusals = counter('portcullis_gateway_audit_unavailable_total', 'Calls refused because their write-ahead audit record could not be stored');

/** What an audit entry names as the target of a request. */
interface Target {
  service: string;
  tool: string;
  action: string;
  resource: string;
}

/** A name as the caller sent it, bounded: it is stored in the audit entry and echoed in the reason. */
const clipName = (name: string) => name.slice(0, 200);

/**
 * Why a tool call names no tool (decision 001): the JSON-RPC error the caller gets (-32602)
 * and the reason of its audit entry.
 */
export function unknownToolReason(name: string): string {
  return `Unknown tool ${JSON.stringify(clipName(name))}. Tool names are <service>__<tool>, exactly as tools/list shows them.`;
}

interface Verdict {
  /** APPROVAL_REQUIRED is never forwarded as such: only the approval it leads to can be (decision 063). */
  decision: 'ALLOW' | 'DENY' | 'APPROVAL_REQUIRED';
  reason: string;
  response: AuthorizeResponse | undefined;
}

/** What an audit entry records of a verdict: ALLOW, or DENY for anything else (a held call is not forwarded). */
const auditedDecision = (decision: Verdict['decision']): 'ALLOW' | 'DENY' => (decision === 'ALLOW' ? 'ALLOW' : 'DENY');

/**
 * The path of one tool call: resolve the prefixed name, get a verdict from the PDP, forward
 * an allowed call upstream with the member's own token, and audit the outcome either way.
 * Nothing is forwarded without an ALLOW verdict.
 */
export function createToolCallService(deps: {
  policy: PolicyClient;
  upstream: UpstreamPool;
  audit: AuditPublisher;
  upstreamUrls: Record<string, string>;
  tokens: SealedTokens;
  /** Call approvals (decision 063); without them an APPROVAL_REQUIRED verdict is denied. */
  approvals?: CallApprovalService;
  /** The server secret: `requestState` of approval round trips is signed under a key derived from it. */
  secret?: string;
  now?: () => number;
}) {
  /** Calls upstream with the connection's tokens: refreshed first when expiring, and once more after a 401. */
  async function callUpstream(context: MemberContext, connection: MemberConnection, service: string, tool: string, args: Record<string, unknown>): Promise<CallToolResult> {
    const holder = { agentId: context.agentId, vaultPrivateKey: context.vaultPrivateKey };
    const target = (accessToken: string) => ({ memberId: context.memberId, service, url: deps.upstreamUrls[service]!, accessToken });
    let tokens = deps.tokens.current(holder, connection);
    if (tokens.refreshToken && deps.tokens.isExpiring(tokens)) tokens = await deps.tokens.refresh(holder, connection, tokens);
    try {
      return await deps.upstream.callTool(target(tokens.accessToken), tool, args);
    } catch (err) {
      if (!(err instanceof UpstreamError && err.kind === 'unauthorized')) throw err;
    }
    tokens = await deps.tokens.refresh(holder, connection, tokens);
    try {
      return await deps.upstream.callTool(target(tokens.accessToken), tool, args);
    } catch (err) {
      if (!(err instanceof UpstreamError && err.kind === 'unauthorized')) throw err;
      await deps.tokens.markNeedsReauth(holder, connection);
      throw new ReauthRequired('The provider refuses even freshly refreshed tokens.');
    }
  }

  /** A catalog tool: its connector, its Cedar action and the resource its arguments name. */
  const toolTarget = (service: string, tool: string, args: Record<string, unknown>): Target =>
    ({ service, tool, action: actionUid(service, tool), resource: resourceOf(service, args).uid });

  /**
   * A request that names no connector, held against the agent (decision 071): `service` empty,
   * the proxy's own action for `method` — a tool call whose name names no connector (`tool` the
   * name as sent, method `tools/call`) or a protocol request (`tool` its method).
   */
  const agentTarget = (context: MemberContext, tool: string, method: string): Target =>
    ({ service: '', tool, action: entityUid(GATEWAY_ACTION_TYPE, method), resource: entityUid(AGENT_TYPE, context.agentId) });

  /**
   * The target of a tool call named `name`: the connector its prefix names — its catalog tool,
   * or the unknown tool under that connector's Cedar action (decision 071) — else the name as sent.
   */
  function callTargetOf(context: MemberContext, name: string, args: Record<string, unknown>): Target {
    const parts = splitToolName(name);
    return parts ? toolTarget(parts.service, clipName(parts.tool), args) : agentTarget(context, clipName(name), 'tools/call');
  }

  function baseEntry(context: MemberContext, request: ToolCallRequest, target: Target): Omit<AuditEntry, 'decision' | 'reason' | 'durationMs' | 'matchedPolicyIds' | 'matchedPolicyNames' | 'policyVersionIds' | 'policyDbIds'> {
    return {
      id: uuidv7(),
      timestamp: new Date(deps.now?.() ?? Date.now()).toISOString(),
      agentId: context.agentId,
      agentName: context.agentName,
      memberId: context.memberId,
      memberName: context.memberEmail,
      memberKeyId: context.keyId,
      ...(request.sessionId ? { sessionId: request.sessionId } : {}),
      ...(context.oauth ? { oauthClientId: context.oauth.clientId } : {}),
      ...target,
      callerIp: request.callerIp,
      toolArgs: redactToolArgs(request.args),
      principal: principalUid(context.memberId),
    };
  }

  async function decide(context: MemberContext, request: ToolCallRequest, service: string, tool: string): Promise<Verdict> {
    const stopTimer = authorizeDuration.startTimer();
    try {
      const response = await deps.policy.authorize({
        agentId: context.agentId,
        member: { id: context.memberId, role: context.memberRole, status: context.memberStatus, email: context.memberEmail },
        service,
        tool,
        toolArgsJson: JSON.stringify(request.args),
        sessionId: request.sessionId ?? '',
        policyVersion: context.agentPolicyVersion,
        nowMs: deps.now?.() ?? 0,
      });
      const decision = response.decision === 'ALLOW' || response.decision === 'APPROVAL_REQUIRED' ? response.decision : 'DENY';
      return { decision, reason: response.reason, response };
    } catch {
      return { decision: 'DENY', reason: POLICY_UNAVAILABLE, response: undefined };
    } finally {
      stopTimer();
    }
  }

  /** A verdict's reason as the caller's agent reads it: without policy names where the caller may not see them. */
  function policyReasonFor(context: MemberContext, reason: string): string {
    return hidesPolicyIdentities(context.agentType, context.memberRole) ? reasonWithoutPolicyNames(reason) : reason;
  }

  function denyResult(reason: string): CallToolResult {
    return { isError: true, content: [{ type: 'text', text: reason }] };
  }

  /** A DENY entry with nothing matched: a refusal decided before any verdict. */
  const refusalOf = (entry: ReturnType<typeof baseEntry>, reason: string, durationMs = 0): AuditEntry => ({
    ...entry, decision: 'DENY', reason, matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [], durationMs,
  });

  /**
   * The call itself. In single-process mode (decision 070) no answer leaves before the call's
   * intent is durable in the local log: an entry stands for every answered call even if the
   * process dies before the answer's own entry is written. The intent's sync overlaps the verdict.
   */
  async function callToolTraced(context: MemberContext, request: ToolCallRequest): Promise<CallToolResult | InputRequiredResult> {
    const call: { intent?: Promise<void> } = {};
    try {
      return await resolveDecideForward(context, request, call);
    } finally {
      await call.intent;
    }
  }

  /** Resolve, decide, record ahead, forward, audit; `call.intent` is set once the call has one. */
  async function resolveDecideForward(context: MemberContext, request: ToolCallRequest, call: { intent?: Promise<void> }): Promise<CallToolResult | InputRequiredResult> {
    const started = performance.now();
    const traceparent = currentTraceHeaders().traceparent;
    const target = callTargetOf(context, request.name, request.args);
    const base = { ...baseEntry(context, request, target), ...(traceparent ? { traceparent } : {}) };
    if (!getTool(target.service, target.tool)) {
      // No such tool: a protocol error for the caller, and still a call the owner sees as denied.
      const reason = unknownToolReason(request.name);
      toolCalls.inc({ service: target.service, decision: 'DENY' });
      const refusal = refusalOf(base, reason, Math.round((performance.now() - started) * 1000) / 1000);
      call.intent = deps.audit.intend(refusal);
      deps.audit.publish(refusal);
      throw new McpError(ErrorCode.InvalidParams, reason);
    }
    const { service, tool } = target;
    // A retry that carries approval state: refused outright unless this server minted it for this very call.
    const stateProblem = requestStateProblem(context, request);
    if (stateProblem) throw new McpError(ErrorCode.InvalidParams, `Invalid params: ${stateProblem}`);
    // What stands for the call if the process stops before its verdict is in the local log
    // (single-process mode, decision 070); its sync runs while the verdict is awaited.
    call.intent = deps.audit.intend(refusalOf(base, OUTCOME_UNDECIDED));
    const entryOf = (verdict: Verdict, reason: string, approval?: Pick<AuditEntry, 'approvalId' | 'approvalEvent'>): AuditEntry => {
      const r = verdict.response;
      return {
        ...base,
        ...(r ? { action: r.action || base.action, resource: r.resource || base.resource, principal: r.principal || base.principal } : {}),
        decision: auditedDecision(verdict.decision),
        reason,
        matchedPolicyIds: r?.matchedPolicyKeys ?? [],
        matchedPolicyNames: r?.matchedPolicyNames ?? [],
        policyDbIds: r?.matchedPolicyIds ?? [],
        policyVersionIds: r?.policyVersionIds ?? [],
        ...(r?.shadowDecision === 'ALLOW' || r?.shadowDecision === 'DENY' || r?.shadowDecision === 'APPROVAL_REQUIRED'
          ? { shadowDecision: r.shadowDecision, shadowPolicyIds: r.shadowPolicyKeys ?? [], shadowPolicyDbIds: r.shadowPolicyIds ?? [] }
          : {}),
        ...(approval ?? {}),
        durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      };
    };
    const finish = (verdict: Verdict, reason = verdict.reason, approval?: Pick<AuditEntry, 'approvalId' | 'approvalEvent'>) => {
      const entry = entryOf(verdict, reason, approval);
      toolCalls.inc({ service, decision: entry.decision });
      callDuration.observe({ decision: entry.decision }, entry.durationMs / 1000);
      deps.audit.publish(entry);
      return entry;
    };

    // Membership comes first: a member who is not approved hears that from the decision point
    // (its built-in forbid), not that a connector is missing that they could not connect yet.
    const membershipVerdict = context.memberStatus === 'approved' ? undefined : await decide(context, request, service, tool);
    if (membershipVerdict !== undefined && membershipVerdict.decision !== 'ALLOW') {
      finish(membershipVerdict);
      return denyResult(policyReasonFor(context, membershipVerdict.reason));
    }

    const connection = context.connections.find((c) => c.service === service);
    if (!context.allowedServices.includes(service) || !connection) {
      const label = getConnector(service)!.label;
      const reason = !context.allowedServices.includes(service)
        ? `${label} is not enabled on this agent`
        : `${label} is not connected for this member; connect it in the dashboard first`;
      finish({ decision: 'DENY', reason, response: undefined });
      return denyResult(reason);
    }

    let verdict = membershipVerdict ?? await decide(context, request, service, tool);
    if (verdict.decision === 'DENY') {
      finish(verdict);
      return denyResult(policyReasonFor(context, verdict.reason));
    }
    let approvalId: string | undefined;
    if (verdict.decision === 'APPROVAL_REQUIRED') {
      const held = await heldCall(context, request, service, tool, base.toolArgs, verdict, finish);
      if ('result' in held) return held.result;
      // Approved, and spent by this call: forwarded once, as an ALLOW naming the approval.
      approvalId = held.approvalId;
      verdict = { decision: 'ALLOW', reason: held.reason, response: verdict.response };
    }
    // Fail closed: nothing but an ALLOW goes upstream.
    if (verdict.decision !== 'ALLOW') {
      finish({ ...verdict, decision: 'DENY' });
      return denyResult(policyReasonFor(context, verdict.reason));
    }
    const executed = approvalId ? { approvalId, approvalEvent: 'executed' as const } : undefined;

    // Write-ahead: the call goes upstream only once its record is durably accepted, so a
    // gateway that dies mid-call still leaves an entry. The completion replaces it (same id).
    // With a local log the durable intent covers it: it waits for a write, not a second sync.
    try {
      await timed('audit_record', () => deps.audit.record({ ...entryOf(verdict, `${verdict.reason || NO_FORBID_MATCHED}; ${OUTCOME_PENDING}`, executed), stage: 'decision' }));
    } catch (err) {
      if (!(err instanceof AuditUnavailable)) throw err;
      auditRefusals.inc();
      finish({ decision: 'DENY', reason: AUDIT_UNAVAILABLE, response: undefined });
      return denyResult(AUDIT_UNAVAILABLE);
    }
    if (approvalId) deps.approvals!.recordEventId(approvalId, base.id);
    // An approved call's completion keeps its `executed` label; its outcome is a `returned` event of its own (decision 063).
    const complete = (reason = verdict.reason) => {
      const entry = finish(verdict, reason, executed);
      if (approvalId) {
        deps.approvals!.recordEvent(approvalId, { ...entry, id: uuidv7(), timestamp: new Date(deps.now?.() ?? Date.now()).toISOString(), approvalEvent: 'returned' })
          .catch(() => undefined);
      }
    };
    try {
      const result = await timed('upstream', () => callUpstream(context, connection, service, tool, request.args));
      complete();
      return result;
    } catch (err) {
      if (err instanceof ReauthRequired) {
        const label = getConnector(service)!.label;
        complete(`${verdict.reason || NO_FORBID_MATCHED}; upstream error: ${label} connection needs reauthorization`);
        return denyResult(`${label} needs to be reconnected: ${err.message} Reconnect ${label} for this agent in the Portcullis dashboard, then retry.`);
      }
      const message = err instanceof UpstreamError ? err.message : 'The connector failed.';
      complete(`${verdict.reason || NO_FORBID_MATCHED}; upstream error: ${message}`);
      throw new McpError(ErrorCode.InternalError, `${getConnector(service)!.label}: ${message}`);
    }
  }

  /**
   * Why a retry's `requestState` is refused (decision 063), or undefined when there is none or
   * it is one this server minted for this caller, tool and arguments. Attacker-controlled input:
   * its signature is checked before anything in it is read.
   */
  function requestStateProblem(context: MemberContext, request: ToolCallRequest): string | undefined {
    const presented = request.approvalFlow?.requestState;
    if (presented === undefined) return undefined;
    if (!deps.secret) return 'requestState is not accepted by this server';
    const read = readRequestState(deps.secret, presented, deps.now?.() ?? Date.now());
    if (!read.ok) return read.problem;
    const { state } = read;
    if (state.agentId !== context.agentId || state.memberId !== context.memberId) return 'requestState was issued to another caller';
    if (state.name !== request.name || state.argsDigest !== argsDigest(request.args)) return 'requestState was issued for another tool call (same tool and arguments are required)';
    return undefined;
  }

  /**
   * A call the decision point held for approval (decision 063): answered from the newest request
   * of its binding — awaiting (a tool result, or `input_required` for 2026-07-28 clients with
   * URL elicitation), denied, expired — or `{approvalId}` when an approval was spent on it and it
   * may be forwarded. Every answer is audited as a DENY naming the request.
   */
  async function heldCall(
    context: MemberContext, request: ToolCallRequest, service: string, tool: string, redactedArgs: Record<string, unknown>, verdict: Verdict,
    finish: (verdict: Verdict, reason?: string, approval?: Pick<AuditEntry, 'approvalId' | 'approvalEvent'>) => AuditEntry,
  ): Promise<{ result: CallToolResult | InputRequiredResult } | { approvalId: string; reason: string }> {
    if (!deps.approvals || !verdict.response) {
      const reason = 'Denied: this call needs an owner\'s approval, and approvals are not available on this server';
      finish({ ...verdict, decision: 'DENY' }, reason);
      return { result: denyResult(reason) };
    }
    const approvals = deps.approvals;
    let outcome: Awaited<ReturnType<CallApprovalService['onApprovalRequired']>>;
    try {
      outcome = await approvals.onApprovalRequired(context, { service, tool, args: request.args, redactedArgs, verdict: verdict.response });
    } catch {
      // Fail closed: without the approval store the call can be neither held nor forwarded.
      finish({ ...verdict, decision: 'DENY' }, APPROVALS_UNAVAILABLE);
      return { result: denyResult(APPROVALS_UNAVAILABLE) };
    }
    if (outcome.kind === 'queue_full') {
      // Over the open-request cap (decision 067): neither held nor forwarded, audited as a DENY saying so.
      finish({ ...verdict, decision: 'DENY' }, outcome.reason);
      return { result: denyResult(outcome.reason) };
    }
    const { approval } = outcome;
    const meta = { [APPROVAL_META_KEY]: { id: approval.id, status: approval.status, expiresAt: approval.expiresAt, url: approvals.pageUrl(approval.agentId, approval.id) } };
    const held = (reason: string, text: string, event?: 'proposed') => {
      const entry = finish({ ...verdict, decision: 'DENY' }, reason, { approvalId: approval.id, ...(event ? { approvalEvent: event } : {}) });
      approvals.recordEventId(approval.id, entry.id);
      return { isError: true, content: [{ type: 'text' as const, text }], _meta: meta };
    };
    switch (outcome.kind) {
      case 'approved':
        return { approvalId: approval.id, reason: `Approved by ${approval.approverEmail ?? 'an owner'} (approval request ${approval.id}); forwarded once` };
      case 'denied':
        return { result: held(`Denied by an owner (approval request ${approval.id}): ${approval.reason ?? ''}`, `Denied by an owner of the agent: ${approval.reason ?? 'no reason given'} (approval request ${approval.id}). The call was not forwarded.`) };
      case 'expired':
        return {
          result: held(
            `Approval request ${approval.id} expired; not forwarded`,
            `The approval request ${approval.id} for this call expired before it was ${approval.decidedAt ? 'used' : 'decided'}; the call was not forwarded. Calling again asks the owners again.`,
          ),
        };
      case 'pending': {
        const text = `This call needs an owner's approval before it runs, so it was not forwarded. Approval request ${approval.id} is open until ${approval.expiresAt}; an owner of the agent can approve or deny it at ${meta[APPROVAL_META_KEY].url}. Once it is approved, make exactly the same call again (same tool, same arguments) to run it once.`;
        const result = held(`Awaiting an owner's approval (request ${approval.id}): not forwarded`, text, 'proposed');
        const flow = request.approvalFlow;
        const declined = answeredWithout(flow?.inputResponses);
        if (!flow?.urlElicitation || declined || !deps.secret) return { result };
        const requestState = mintRequestState(deps.secret, {
          approvalId: approval.id, agentId: context.agentId, memberId: context.memberId, name: request.name, argsDigest: approval.argsDigest,
          exp: Date.parse(approval.expiresAt),
        });
        return {
          result: {
            resultType: 'input_required',
            inputRequests: {
              [APPROVAL_INPUT_KEY]: {
                method: 'elicitation/create',
                params: { mode: 'url', message: text, url: meta[APPROVAL_META_KEY].url, elicitationId: approval.id },
              },
            },
            requestState,
            _meta: meta,
          },
        };
      }
    }
  }

  const tracer = tracerOf('gateway');

  return {
    /** One tool call, traced as `tools/call` (the decision point and the audit writer continue the trace). */
    callTool(context: MemberContext, request: ToolCallRequest): Promise<CallToolResult | InputRequiredResult> {
      // Without tracing the span would be a no-op: skip making it and its context on every call.
      if (!tracingEnabled()) return callToolTraced(context, request);
      return tracer.startActiveSpan('tools/call', { kind: SpanKind.SERVER, attributes: { 'mcp.tool': request.name, 'portcullis.agent_id': context.agentId } }, async (span) => {
        try {
          const result = await callToolTraced(context, request);
          if (result.isError) span.setAttribute('portcullis.decision', 'DENY');
          return result;
        } catch (err) {
          span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
          throw err;
        } finally {
          span.end();
        }
      });
    },

    /**
     * Audits a request refused before any tool ran (the agent is disabled). A `tools/call` is
     * a tool call and names its tool (or the unknown name); any other request — `method` is
     * its JSON-RPC method, or `HTTP <method>` without a JSON-RPC body — is a protocol request
     * (`isProtocolRequest` in core), which call counters leave out (decisions 001, 071).
     */
    /**
     * Audits a request refused before it is served; resolves once its entry is in the local log
     * (single-process mode, decision 070; at once on NATS), so the refusal is answered after it.
     */
    auditRefusedRequest(context: MemberContext, request: ToolCallRequest & { method: string }, reason: string): Promise<void> {
      const target = request.method === 'tools/call'
        ? callTargetOf(context, request.name, request.args)
        : agentTarget(context, clipName(request.method), clipName(request.method));
      const refusal = refusalOf(baseEntry(context, request, target), reason);
      const written = deps.audit.intend(refusal);
      deps.audit.publish(refusal);
      return written;
    },
  };
}

export type ToolCallService = ReturnType<typeof createToolCallService>;
