import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connectors, createNatsBus, openDatabase, type Bus, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix, type TestDatabase } from '@portcullis/core/testing';
import { freePort, LOAD_TEST_QUOTAS, startTs, type RunningProcess } from './processes.ts';

export interface SplitTopology {
  /** Base URLs of the gateway replicas. */
  gateways: string[];
  sandboxUrl: string;
  outboxDir: string;
  /** `PORTCULLIS_SECRET` of every process. */
  serverSecret: string;
  database: DatabaseHandle;
  /** A bus client of the test's own, on the topology's subjects. */
  bus: Bus;
  /** Prometheus scrape URLs by process name (gateways serve /metrics on their own port). */
  metrics: Record<string, string>;
  /** The processes by name: sandbox, policy (policy1, …), audit, gateway0, gateway1, … */
  processes: Record<string, RunningProcess>;
  /**
   * Starts the named process again (stopping it first if it still runs) on the same address
   * and data, with `env` over its first environment; resolves once it is listening.
   */
  restart(name: string, env?: Record<string, string>): Promise<RunningProcess>;
  stop(): Promise<void>;
}

/**
 * Portcullis split into processes on the machine's Postgres (a throwaway database) and NATS
 * JetStream (a subject prefix of its own): sandbox, policy, audit, and `gatewayCount` gateways.
 */
export async function startSplitTopology(options: {
  gatewayCount?: number;
  /** Decision points (default 1): `policy`, `policy1`, …; gateway i asks decision point i mod count. */
  policyCount?: number;
  /** Over every process's environment. */
  env?: Record<string, string>;
  /** Over the gateways' environment only (e.g. an `UPSTREAM_<KEY>_URL`). */
  gatewayEnv?: Record<string, string>;
} = {}): Promise<SplitTopology> {
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-split-'));
  const outboxDir = join(dataDir, 'outbox');
  const testDb: TestDatabase = await createTestDatabase('split');
  const processes: RunningProcess[] = [];
  const specs = new Map<string, { entry: string; env: Record<string, string>; ready: RegExp }>();
  const launch = (name: string, entry: string, env: Record<string, string>, ready: RegExp) => {
    specs.set(name, { entry, env, ready });
    const proc = startTs(entry, env, name);
    processes.push(proc);
    return proc;
  };
  const shared = {
    NODE_ENV: 'development', PORTCULLIS_SECRET: randomBytes(32).toString('base64url'), LOG_LEVEL: 'warn',
    NATS_URL: TEST_NATS_URL, NATS_SUBJECT_PREFIX: uniqueSubjectPrefix('split'), ...LOAD_TEST_QUOTAS, ...options.env,
  };
  try {
    const [sandboxPort, auditPort] = await Promise.all([freePort(), freePort()]);
    const policyPorts = await Promise.all(Array.from({ length: options.policyCount ?? 1 }, () => freePort()));
    const metricsPorts = await Promise.all(Array.from({ length: policyPorts.length + 1 }, () => freePort()));
    const metrics: Record<string, string> = {};
    const metricsEnv = (name: string, i: number) => {
      metrics[name] = `http://127.0.0.1:${metricsPorts[i]}/metrics`;
      return { METRICS_ADDRESS: `127.0.0.1:${metricsPorts[i]}` };
    };
    const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
    const started = [
      launch('sandbox', 'services/sandbox/src/main.ts', { ...shared, SANDBOX_PORT: String(sandboxPort), DATA_DIR: join(dataDir, 'sandbox') }, /sandbox listening/),
      ...policyPorts.map((port, i) => launch(i === 0 ? 'policy' : `policy${i}`, 'services/policy/src/main.ts', {
        ...shared, ...metricsEnv(i === 0 ? 'policy' : `policy${i}`, i), DATABASE_URL: testDb.url, GRPC_ADDRESS: `127.0.0.1:${port}`, AUDIT_URL: `127.0.0.1:${auditPort}`, DATA_DIR: join(dataDir, `policy${i}`),
      }, /policy listening/)),
      launch('audit', 'services/audit/src/main.ts', { ...shared, ...metricsEnv('audit', policyPorts.length), DATABASE_URL: testDb.url, GRPC_ADDRESS: `127.0.0.1:${auditPort}`, DATA_DIR: join(dataDir, 'audit') }, /audit listening/),
    ];
    await Promise.all(started.map((proc, i) => proc.waitFor([...specs.values()][i]!.ready)));

    const upstreams = Object.fromEntries(connectors.map((c) => [`UPSTREAM_${c.key.toUpperCase()}_URL`, `${sandboxUrl}/${c.key}/mcp`]));
    const gateways: string[] = [];
    for (let i = 0; i < (options.gatewayCount ?? 1); i++) {
      const port = await freePort();
      const gateway = launch(`gateway${i}`, 'services/gateway/src/main.ts', {
        ...shared, ...upstreams, DATABASE_URL: testDb.url, PORT: String(port), DATA_DIR: join(dataDir, `gateway${i}`),
        POLICY_URL: `127.0.0.1:${policyPorts[i % policyPorts.length]}`, AUDIT_URL: `127.0.0.1:${auditPort}`, MAIL_URL: `file://${outboxDir}`,
        PUBLIC_URL: `http://127.0.0.1:${port}`, ...options.gatewayEnv,
      }, /gateway listening/);
      await gateway.waitFor(/gateway listening/);
      gateways.push(`http://127.0.0.1:${port}`);
      metrics[`gateway${i}`] = `http://127.0.0.1:${port}/metrics`;
    }
    const database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    const bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: shared.NATS_SUBJECT_PREFIX });
    const byName = Object.fromEntries([...specs.keys()].map((name, i) => [name, processes[i]!]));
    return {
      gateways, sandboxUrl, outboxDir, serverSecret: shared.PORTCULLIS_SECRET, database, bus, processes: byName, metrics,
      async restart(name, env = {}) {
        const spec = specs.get(name);
        if (!spec) throw new Error(`no process named ${name}`);
        await byName[name]!.stop();
        const proc = startTs(spec.entry, { ...spec.env, ...env }, name);
        processes.push(proc);
        byName[name] = proc;
        await proc.waitFor(spec.ready);
        return proc;
      },
      async stop() {
        for (const proc of processes.reverse()) await proc.stop();
        await bus.close();
        await database.close();
        await testDb.drop();
        await deleteTestStreams(shared.NATS_URL, shared.NATS_SUBJECT_PREFIX).catch(() => undefined);
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const proc of processes.reverse()) await proc.stop();
    await testDb.drop();
    throw err;
  }
}
