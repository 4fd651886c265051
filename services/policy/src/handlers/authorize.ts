import type * as grpc from '@grpc/grpc-js';
import { SpanKind } from '@opentelemetry/api';
import { contextFromTraceHeaders, counter, histogram, tracerOf, tracingEnabled, type AuthorizeRequest, type AuthorizeResponse } from '@portcullis/core';
import { denyWithoutPolicySet, evaluate, UNKNOWN_AGENT_REASON, type AuthorizeInput, type Verdict } from '../engine/evaluate.ts';
import type { PolicyCache } from '../engine/policy-cache.ts';
import type { PreparedPolicySet } from '../engine/prepared-set.ts';
import type { SessionJudge } from '../engine/session-counters.ts';
import { PolicyServiceError } from '../errors.ts';
import { toGrpcError } from './grpc-status.ts';

export interface AuthorizeHandlerDeps {
  cache: Pick<PolicyCache, 'peek' | 'load'>;
  /** Allowed-call counters of session limits, shared by every decision point. */
  counters: SessionJudge;
  /** Clock used when a request carries no `now_ms`. */
  now?: () => number;
  /**
   * Added to the evaluation instant, whether it came from `now_ms` or the clock
   * (`POLICY_CLOCK_OFFSET_MS`, tests only: refused in production). Default 0.
   */
  clockOffsetMs?: number;
}

const decisions = counter('portcullis_policy_decisions_total', 'Verdicts of the decision point', ['decision']);
const decisionTime = histogram('portcullis_policy_authorize_duration_seconds', 'Authorize handling time in the decision point (set loading included)');

/** Where one decision's outcome goes: a gRPC status for a failure, else the verdict. */
export type DecisionCallback = (err: Partial<grpc.StatusObject> | null, value?: AuthorizeResponse) => void;

/** The caller's W3C trace headers (`traceparent`, `tracestate`), when it sent them. */
export type TraceHeaders = Record<string, string | undefined>;

/**
 * One verdict on one tool call: the single decision path of unary `Authorize` and of
 * `AuthorizeStream`. A cached, current set answers synchronously with no I/O; otherwise the
 * set is loaded first. Only a malformed request or an unreachable store is an error; every
 * other outcome, unknown agent included, is a verdict.
 */
export type Decide = (request: AuthorizeRequest, traceHeaders: TraceHeaders, done: DecisionCallback) => void;

export function createAuthorizeDecider(deps: AuthorizeHandlerDeps): Decide {
  const now = deps.now ?? Date.now;
  const clockOffsetMs = deps.clockOffsetMs ?? 0;
  const tracer = tracerOf('policy');
  return (request, traceHeaders, done) => {
    const stopTimer = decisionTime.startTimer();
    // The gateway's trace continues here when it sent one; without tracing no span is made at all.
    const span = tracingEnabled() ? tracer.startSpan('Authorize', { kind: SpanKind.SERVER }, contextFromTraceHeaders(traceHeaders)) : undefined;
    const callback: DecisionCallback = (err, value) => {
      stopTimer();
      if (value) {
        decisions.inc({ decision: value.decision === 'ALLOW' ? 'ALLOW' : 'DENY' });
        span?.setAttribute('portcullis.decision', value.decision);
      }
      span?.end();
      done(err, value);
    };

    let input: AuthorizeInput;
    let minVersion: number;
    let verdict: Verdict | Promise<Verdict> | undefined;
    const decide = (set: PreparedPolicySet) => deps.counters.judge(input.sessionId, (sessions) => evaluate(set, input, sessions ? { sessions } : {}));
    try {
      input = readAuthorizeRequest(request, now, clockOffsetMs);
      minVersion = Math.max(0, Number(request.policyVersion) || 0);
      const cached = deps.cache.peek(input.agentId, minVersion);
      if (cached) verdict = decide(cached);
    } catch (err) {
      return callback(toGrpcError(err));
    }
    if (verdict && !(verdict instanceof Promise)) return callback(null, verdict);
    void (verdict ?? deps.cache.load(input.agentId, minVersion).then((set) => (set ? decide(set) : denyWithoutPolicySet(input, UNKNOWN_AGENT_REASON))))
      .then((decided) => callback(null, decided), (err: unknown) => callback(toGrpcError(err)));
  };
}

/** `Authorize`: one verdict per unary call; the caller's trace arrives in the call's metadata. */
export function createAuthorizeHandler(deps: AuthorizeHandlerDeps): grpc.handleUnaryCall<AuthorizeRequest, AuthorizeResponse> {
  const decide = createAuthorizeDecider(deps);
  return (call, callback) => decide(call.request, {
    traceparent: call.metadata?.get('traceparent')[0]?.toString(),
    tracestate: call.metadata?.get('tracestate')[0]?.toString(),
  }, callback);
}

/**
 * Reads and checks the wire request; throws `PolicyServiceError('invalid_request')` naming the
 * bad field. The evaluation instant is `now_ms` (else the clock) plus `clockOffsetMs`.
 */
export function readAuthorizeRequest(request: AuthorizeRequest, now: () => number, clockOffsetMs = 0): AuthorizeInput {
  const member = request.member;
  if (!request.agentId) throw invalid('agent_id is required');
  if (!member?.id) throw invalid('member.id is required');
  if (!request.service) throw invalid('service is required');
  if (!request.tool) throw invalid('tool is required');
  const nowMs = (Number(request.nowMs) > 0 ? Math.trunc(Number(request.nowMs)) : Math.trunc(now())) + clockOffsetMs;
  return {
    agentId: request.agentId,
    member: { id: member.id, role: member.role ?? '', status: member.status ?? '', email: member.email ?? '' },
    service: request.service,
    tool: request.tool,
    args: parseToolArgs(request.toolArgsJson),
    nowMs,
    sessionId: request.sessionId ?? '',
  };
}

function parseToolArgs(json: string | undefined): Record<string, unknown> {
  if (!json) return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw invalid('tool_args_json is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('tool_args_json must be a JSON object');
  return value as Record<string, unknown>;
}

function invalid(message: string): PolicyServiceError {
  return new PolicyServiceError('invalid_request', message);
}
