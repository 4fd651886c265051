export { baseConfigShape, ConfigError, parseConfig, readPrivateFile, resolveSecret, writePrivateFile } from './config.ts';
export { ApiError, statusOf, type ApiErrorCode } from './errors.ts';
export { digestKey, displaySuffixOf, generateMemberKey, looksLikeMemberKey } from './keys.ts';
export { findSecretSpans, isSecretKey, redactToolArgs, REDACTED, type SecretSpan } from './redact.ts';
export {
  APPROVAL_EVENTS, APPROVAL_EVENTS_NOT_CALLS, auditEntryOf, auditEntrySchema, NO_FORBID_MATCHED, POLICY_FAILED_REASON, POLICY_FAILED_REDACTED, POLICY_NAMED_REASON, reasonWithoutPolicyNames, redactPolicyIdentities, UPSTREAM_ERROR_MARKER,
  type ApprovalEvent, type AuditEntry, type Decision,
} from './audit-entry.ts';
export { parseAuditBound } from './audit-range.ts';
export {
  connectors, getConnector, getTool, inputSchemaOf, isConnectorKey, prefixedToolName, splitToolName,
  TIERS, TOOL_NAME_SEPARATOR, toolsCovered,
  type CatalogTool, type Connector, type OAuthKind, type ParamSpec, type Tier, type ToolInputSchema,
} from './catalog/catalog.ts';
export { actionUid, AGENT_TYPE, cedarNamespace, cedarString, entityUid, principalUid, PRINCIPAL_TYPE, resourceOf, resourceTypesOf } from './cedar-naming.ts';
export { openDatabase, type Database, type DatabaseHandle } from './db/database.ts';
export * as schema from './db/schema/index.ts';
export type { ConnectionOAuth, OAuthFlowTarget } from './db/schema/index.ts';
export { auditMessageId, changeSubject, type AuditConsumer, type AuditConsumerOptions, type Bus, type ChangeEvent, type KeyValueBucket, type SinkFeed } from './bus/bus.ts';
export { createMemoryBus } from './bus/memory-bus.ts';
export { openDurableMemoryBus } from './bus/durable-memory-bus.ts';
export { createNatsBus, type NatsBusOptions } from './bus/nats-bus.ts';
export { openBus } from './bus/open-bus.ts';
export { AuditQueryService, bindServer, channelOptions, PolicyDecisionService } from './grpc/proto.ts';
export type * from './grpc/types.ts';
export { createMemberVault, openSealed, rewrapMemberVault, sealToMember, unwrapPrivateKey, VaultError, type MemberVault } from './vault.ts';
export { isolatingFetch } from './mcp/isolating-fetch.ts';
export { GATEWAY_ACTION_TYPE, isProtocolRequest, NO_CONNECTOR_CALL_ACTION } from './mcp/protocol-service.ts';
export { openWithSecret, sealWithSecret } from './secret-box.ts';
export { deliverToSink, SinkDeliveryError, type SinkTarget, type WebhookSinkBody } from './sinks/deliver.ts';
export { sinkEntryOf, type SinkEntry } from './sinks/sink-entry.ts';
export { otlpAttributesOf, otlpLogsBody } from './sinks/otlp-logs.ts';
export { otlpLogsUrl, sinkUrlProblem } from './sinks/sink-url.ts';
export { SINK_SIGNATURE_HEADER, SINK_SIGNATURE_TOLERANCE_SECONDS, signSinkBody, verifySinkSignature } from './sinks/webhook-signature.ts';
export { sealSinkHeaders, sealSinkSecret, sinkHeaderNames, sinkTargetOf } from './sinks/sink-target.ts';
export { isLoopbackHostname } from './sinks/loopback.ts';
export {
  addressRange, allowedDestinationsSetting, checkDestination, NO_ALLOWED_DESTINATIONS, parseAllowedDestinations,
  type AllowedDestinations, type DestinationCheck, type DestinationRule, type HostResolver, type ResolvedAddress,
} from './net/outbound-destination.ts';
export { connectPinned, OutboundError, sendOutbound, type ConnectTarget, type OutboundConnector, type OutboundFailure, type OutboundRule } from './net/outbound-request.ts';
export * from './policy-conditions.ts';
export { LinearPattern, PATTERN_CALL_BUDGET, PATTERN_PROGRAM_MAX, PATTERN_TEXT_MAX, PatternRun, type PatternCompilation } from './patterns.ts';
export { counter, histogram, LATENCY_BUCKETS, metricsRegistry, startMetricsServer } from './metrics.ts';
export { contextFromTraceHeaders, currentTraceHeaders, initTracing, shutdownTracing, tracerOf, tracingEnabled, type TracingOptions } from './tracing.ts';
export { addHealthService } from './grpc/health.ts';
export { toAuditEntryMsg } from './grpc/entry-message.ts';
