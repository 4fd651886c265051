import { JsonLogsSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { SinkEntry } from './sink-entry.ts';

type LogRecord = Parameters<typeof JsonLogsSerializer.serializeRequest>[0][number];
type Attributes = Record<string, string | number | string[]>;

/** OTel severity numbers: INFO for an allowed call, WARN for a denied one. */
const SEVERITY = { ALLOW: { number: 9, text: 'INFO' }, DENY: { number: 13, text: 'WARN' } } as const;
const SCOPE = { name: 'portcullis.audit', version: '1' };

/**
 * One OTLP log record's attributes for an audit entry: every field of the entry, under
 * `portcullis.*` names (decision 057); the caller's address under the semantic convention's
 * `client.address`; the arguments as one JSON string (collectors index strings, not nested maps).
 */
export function otlpAttributesOf(e: SinkEntry): Attributes {
  return {
    'portcullis.audit.id': e.id,
    'portcullis.agent.id': e.agentId,
    'portcullis.agent.name': e.agentName,
    'portcullis.member.id': e.memberId,
    'portcullis.member.name': e.memberName,
    'portcullis.member.key_id': e.memberKeyId,
    ...(e.sessionId ? { 'portcullis.session.id': e.sessionId } : {}),
    'portcullis.service': e.service,
    'portcullis.tool': e.tool,
    'portcullis.action': e.action,
    'portcullis.resource': e.resource,
    'client.address': e.callerIp,
    'portcullis.tool_args': JSON.stringify(e.toolArgs),
    'portcullis.decision': e.decision,
    'portcullis.reason': e.reason,
    'portcullis.policy.ids': e.matchedPolicyIds,
    'portcullis.policy.names': e.matchedPolicyNames,
    'portcullis.policy.version_ids': e.policyVersionIds,
    'portcullis.duration_ms': e.durationMs,
    'portcullis.principal': e.principal,
    ...(e.oauthClientId ? { 'portcullis.oauth.client_id': e.oauthClientId } : {}),
    // What shadow policies would have decided (decision 061), when the agent has any.
    ...(e.shadowDecision ? { 'portcullis.shadow.decision': e.shadowDecision, 'portcullis.shadow.policy_ids': e.shadowPolicyIds ?? [] } : {}),
    // The call approval the entry is an event of (decision 063).
    ...(e.approvalId ? { 'portcullis.approval.id': e.approvalId, 'portcullis.approval.event': e.approvalEvent ?? '' } : {}),
    ...(e.approverId ? { 'portcullis.approval.approver_id': e.approverId, 'portcullis.approval.approver_name': e.approverName ?? '' } : {}),
  };
}

const hrTimeOf = (ms: number): [number, number] => [Math.floor(ms / 1000), (ms % 1000) * 1_000_000];

/**
 * An OTLP/HTTP JSON `ExportLogsServiceRequest` (`POST /v1/logs`) with one log record per entry,
 * encoded by the OpenTelemetry project's own serializer: resource `service.name=portcullis`,
 * scope `portcullis.audit`, the call's time as the record's time, a one-line body.
 */
export function otlpLogsBody(entries: readonly SinkEntry[]): Uint8Array {
  const resource = resourceFromAttributes({ 'service.name': 'portcullis' });
  const observed = hrTimeOf(Date.now());
  const records: LogRecord[] = entries.map((e) => ({
    hrTime: hrTimeOf(Date.parse(e.timestamp)),
    hrTimeObserved: observed,
    severityNumber: SEVERITY[e.decision].number,
    severityText: SEVERITY[e.decision].text,
    body: `${e.decision} ${e.tool} for ${e.memberName}: ${e.reason}`,
    eventName: 'portcullis.audit.entry',
    resource,
    instrumentationScope: SCOPE,
    attributes: otlpAttributesOf(e),
    droppedAttributesCount: 0,
  }));
  const body = JsonLogsSerializer.serializeRequest(records);
  if (!body) throw new Error('the OTLP serializer produced no body');
  return body;
}
