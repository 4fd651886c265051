import type * as grpc from '@grpc/grpc-js';
import type { HistogramRequest, MemberStatsRequest, MembersRequest, OverviewRequest, QueryRequest, SessionActivityRequest, ShadowResultsRequest, StatsRequest } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { exportHandler } from './export.ts';
import type { AuditLogger } from './grpc-errors.ts';
import { handleHistogram } from './histogram.ts';
import { handleMembers } from './members.ts';
import { handleMemberStats } from './member-stats.ts';
import { handleOverview } from './overview.ts';
import { handlePolicyTriggers, type PolicyTriggersRequest } from './policy-triggers.ts';
import { handleQuery } from './query.ts';
import { handleSessionActivity } from './session-activity.ts';
import { handleShadowResults } from './shadow-results.ts';
import { handleStats } from './stats.ts';
import { unaryHandler } from './unary.ts';

/** The `portcullis.audit.v1.AuditQuery` implementation over `store`. */
export function createAuditQueryHandlers(deps: { store: AuditStore; log: AuditLogger }): grpc.UntypedServiceImplementation {
  return {
    Query: unaryHandler('Query', deps.log, (request: QueryRequest) => handleQuery(deps, request)),
    Export: exportHandler(deps),
    Members: unaryHandler('Members', deps.log, (request: MembersRequest) => handleMembers(deps, request)),
    Stats: unaryHandler('Stats', deps.log, (request: StatsRequest) => handleStats(deps, request)),
    PolicyTriggers: unaryHandler('PolicyTriggers', deps.log, (request: PolicyTriggersRequest) => handlePolicyTriggers(deps, request)),
    MemberStats: unaryHandler('MemberStats', deps.log, (request: MemberStatsRequest) => handleMemberStats(deps, request)),
    SessionActivity: unaryHandler('SessionActivity', deps.log, (request: SessionActivityRequest) => handleSessionActivity(deps, request)),
    Histogram: unaryHandler('Histogram', deps.log, (request: HistogramRequest) => handleHistogram(deps, request)),
    Overview: unaryHandler('Overview', deps.log, (request: OverviewRequest) => handleOverview(deps, request)),
    ShadowResults: unaryHandler('ShadowResults', deps.log, (request: ShadowResultsRequest) => handleShadowResults(deps, request)),
  };
}
