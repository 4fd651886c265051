export { createTestDatabase, TEST_NATS_URL, TEST_POSTGRES_URL, uniqueSubjectPrefix, type TestDatabase } from './postgres.ts';
export { deleteTestStreams } from './nats-streams.ts';
