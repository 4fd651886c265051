export { users } from './users.ts';
export { dashboardSessions } from './dashboard-sessions.ts';
export { agents } from './agents.ts';
export { members, type MemberRole, type MemberStatus } from './members.ts';
export { memberKeys } from './member-keys.ts';
export { connections, type ConnectionStatus } from './connections.ts';
export { policies, policyVersions, type PolicyEffect, type PolicyPrincipal } from './policies.ts';
export { signInCodes } from './sign-in-codes.ts';
