import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { createMemoryBus, openDatabase, type Bus, type ChangeEvent, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { loadGatewayConfig } from '../config.ts';
import { composeGateway } from '../gateway.ts';
import { latestMail } from './outbox.ts';

export const HARNESS_ORIGIN = 'http://portcullis.test';

export interface ApiHarness {
  app: FastifyInstance;
  db: DatabaseHandle['db'];
  bus: Bus;
  /** Change events published on the bus since the harness started. */
  events: ChangeEvent[];
  outboxDir: string;
  /** The server secret (`PORTCULLIS_SECRET`) the gateway runs with: tests seal values as it would. */
  secret: string;
  /** Signs `email` in through the real magic-link flow; returns the cookie header value. */
  signIn(email: string): Promise<string>;
  /** `app.inject` with our Origin (so cookie requests pass the same-origin guard) and JSON bodies. */
  request(options: InjectOptions & { cookie?: string }): Promise<LightMyRequestResponse>;
  /**
   * Another gateway replica over the same database and configuration, on `bus` (give the
   * harness and each replica their own NATS connection on one subject prefix to play a cluster).
   * Closed with the harness.
   */
  replica(bus: Bus): Promise<FastifyInstance>;
  close(): Promise<void>;
}

/**
 * The gateway's `/api` over a real throwaway Postgres database and the in-process bus, for
 * router and security tests through `app.inject()`; `options.now` injects a clock. The policy and audit services are not
 * started: routes that need them belong in the end-to-end suites.
 */
export async function createApiHarness(env: Record<string, string> = {}, options: { now?: () => number; bus?: Bus } = {}): Promise<ApiHarness> {
  const testDb: TestDatabase = await createTestDatabase('api');
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-api-'));
  const outboxDir = join(dataDir, 'outbox');
  const database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
  const bus = options.bus ?? createMemoryBus();
  const events: ChangeEvent[] = [];
  bus.onChange((e) => events.push(e));
  const secret = randomBytes(32).toString('base64url');
  const config = loadGatewayConfig({
    NODE_ENV: 'test', DATA_DIR: dataDir, DATABASE_URL: testDb.url, MAIL_URL: `file://${outboxDir}`, PUBLIC_URL: HARNESS_ORIGIN,
    LOG_LEVEL: 'silent', POLICY_URL: '127.0.0.1:1', AUDIT_URL: '127.0.0.1:1',
    // Every injected request comes from one IP: tests of the limits themselves lower these again.
    RATE_LIMIT_MAGIC_LINK_PER_ADDRESS: '1000', RATE_LIMIT_MAGIC_LINK_PER_IP: '100000', RATE_LIMIT_VERIFY_PER_IP: '100000', RATE_LIMIT_MFA_PER_IP: '100000',
    RATE_LIMIT_INVITES_PER_USER: '100000', RATE_LIMIT_INVITES_PER_IP: '100000', RATE_LIMIT_AGENTS_PER_USER: '100000',
    RATE_LIMIT_KEY_ROTATIONS_PER_USER: '100000', RATE_LIMIT_KEY_ROTATIONS_PER_MEMBER: '100000',
    ...env,
  }, secret);
  const { app, release } = await composeGateway(config, { db: database.db, bus, dbPing: database.ping, ...(options.now ? { now: options.now } : {}) });
  const replicas: Array<Awaited<ReturnType<typeof composeGateway>>> = [];
  await app.ready();

  const request: ApiHarness['request'] = ({ cookie, headers, ...rest }) => app.inject({
    ...rest,
    headers: { origin: HARNESS_ORIGIN, ...(cookie ? { cookie } : {}), ...headers },
  });

  return {
    app,
    db: database.db,
    bus,
    events,
    outboxDir,
    secret,
    request,
    async signIn(email) {
      const sent = await request({ method: 'POST', url: '/api/auth/magic-link', payload: { email } });
      if (sent.statusCode !== 202) throw new Error(`magic-link: ${sent.statusCode} ${sent.body}`);
      const { code } = latestMail(outboxDir, email.toLowerCase());
      const verified = await request({ method: 'POST', url: '/api/auth/verify', payload: { email, code } });
      if (verified.statusCode !== 200) throw new Error(`verify: ${verified.statusCode} ${verified.body}`);
      const setCookie = verified.headers['set-cookie'];
      return String(Array.isArray(setCookie) ? setCookie[0] : setCookie).split(';')[0]!;
    },
    async replica(replicaBus) {
      const replica = await composeGateway(config, { db: database.db, bus: replicaBus, dbPing: database.ping, ...(options.now ? { now: options.now } : {}) });
      await replica.app.ready();
      replicas.push(replica);
      return replica.app;
    },
    async close() {
      for (const replica of replicas) {
        await replica.app.close();
        await replica.release();
      }
      await app.close();
      await release();
      await database.close();
      await testDb.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
