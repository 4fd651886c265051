export { createApiHarness, HARNESS_ORIGIN, type ApiHarness } from './api-harness.ts';
export { latestMail, readOutbox, type OutboxMessage } from './outbox.ts';
export { ACTORS, expectedStatus, signInRoleActors, withoutRequestId, type Actor, type RoleActors } from './role-actors.ts';
export { openSseStream, type SseEvent, type SseStream } from './sse-client.ts';
