import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connectors, openDatabase, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { startClickHouseFrontProcess } from '../support/clickhouse-front.ts';
import { freePort, LOAD_TEST_QUOTAS, startTs, type RunningProcess } from '../support/processes.ts';

/** A process of the cluster that can be killed and started again on the same address and data. */
export interface Member {
  readonly name: string;
  /** kill -9 */
  kill(): Promise<void>;
  /** Starts it again; resolves once it is ready. */
  start(): Promise<void>;
  /** What its current process printed (empty for NATS nodes). */
  output(): string;
}

export interface Cluster {
  gateways: string[];
  sandboxUrl: string;
  outboxDir: string;
  clickhouseUrl: string;
  /** What the ClickHouse front printed (the statements it refused). */
  clickhouseOutput(): string;
  /** Each JetStream stream (the audit stream, the KV buckets) and the node leading it now. */
  streamLeaders(): Promise<Record<string, string>>;
  natsUrl: string;
  database: DatabaseHandle;
  members: Record<string, Member>;
  stop(): Promise<void>;
}

function waitForPort(port: number, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = tcpConnect(port, '127.0.0.1');
      socket.once('connect', () => { socket.end(); resolve(); });
      socket.once('error', () => {
        if (Date.now() > deadline) reject(new Error(`nothing listens on ${port}`));
        else setTimeout(attempt, 100);
      });
    };
    attempt();
  });
}

/** Waits until the new cluster has a JetStream meta leader (an R3 stream can be created). */
async function untilJetStreamClustered(natsUrl: string): Promise<void> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: natsUrl.split(',') });
  const deadline = Date.now() + 60_000;
  try {
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.add({ name: 'CLUSTER_READY', subjects: ['cluster.ready'], num_replicas: 3 });
        await jsm.streams.delete('CLUSTER_READY');
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  } finally {
    await nc.close();
  }
}

async function streamLeadersOf(natsUrl: string): Promise<Record<string, string>> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: natsUrl.split(',') });
  try {
    const leaders: Record<string, string> = {};
    for await (const info of (await jetstreamManager(nc)).streams.list()) leaders[info.config.name] = info.cluster?.leader ?? 'none';
    return leaders;
  } finally {
    await nc.close();
  }
}

/**
 * Portcullis as it runs when it outgrows one machine, on loopback: a 3-node NATS cluster
 * (the `nats-server` binary, JetStream, streams and buckets R3), Postgres (a throwaway
 * database), a shared ClickHouse endpoint (the test-only HTTP front over chDB: no ClickHouse
 * server installs here), the sandbox connectors, 2 policy services, 2 audit writers and 2
 * gateways (gateway i asks policy i and audit i).
 */
export async function startCluster(): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'pc-cluster-'));
  const outboxDir = join(dir, 'outbox');
  const testDb: TestDatabase = await createTestDatabase('cluster');
  const stops: Array<() => Promise<void>> = [];
  const members: Record<string, Member> = {};

  try {
    // NATS: three nodes routed to each other.
    const clientPorts = await Promise.all([freePort(), freePort(), freePort()]);
    const routePorts = await Promise.all([freePort(), freePort(), freePort()]);
    const natsUrl = clientPorts.map((p) => `nats://127.0.0.1:${p}`).join(',');
    clientPorts.forEach((port, i) => {
      const storeDir = join(dir, `nats-${i + 1}`);
      mkdirSync(storeDir, { recursive: true });
      let child: ChildProcess | undefined;
      const routes = routePorts.filter((_, j) => j !== i).map((p) => `nats://127.0.0.1:${p}`).join(',');
      members[`nats-${i + 1}`] = {
        name: `nats-${i + 1}`,
        async start() {
          child = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir, '--name', `n${i + 1}`,
            '--cluster_name', 'pc', '--cluster', `nats://127.0.0.1:${routePorts[i]}`, '--routes', routes], { stdio: 'ignore' });
          await waitForPort(port);
        },
        async kill() {
          if (!child || child.exitCode !== null) return;
          const exited = new Promise((resolve) => child!.once('exit', resolve));
          child.kill('SIGKILL');
          await exited;
        },
        output: () => '',
      };
      stops.push(() => members[`nats-${i + 1}`]!.kill());
    });
    await Promise.all(['nats-1', 'nats-2', 'nats-3'].map((n) => members[n]!.start()));
    await untilJetStreamClustered(natsUrl);

    const clickhouse = await startClickHouseFrontProcess(join(dir, 'clickhouse'));
    stops.push(async () => { await clickhouse.process.stop(); });

    const shared = {
      NODE_ENV: 'development', PORTCULLIS_SECRET: randomBytes(32).toString('base64url'), LOG_LEVEL: 'warn',
      NATS_URL: natsUrl, NATS_REPLICAS: '3', DATABASE_URL: testDb.url, ...LOAD_TEST_QUOTAS,
    };
    /** A Portcullis process as a cluster member: the same entry, env and address on every start. */
    const service = (name: string, entry: string, env: Record<string, string>, ready: RegExp): Member => {
      let proc: RunningProcess | undefined;
      const member: Member = {
        name,
        async start() {
          proc = startTs(entry, { ...shared, ...env }, name);
          await proc.waitFor(ready, 60_000);
        },
        async kill() { await proc?.stop('SIGKILL'); },
        output: () => proc?.output() ?? '',
      };
      stops.push(async () => { await proc?.stop(); });
      members[name] = member;
      return member;
    };

    const sandboxPort = await freePort();
    const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
    const sandbox = service('sandbox', 'services/sandbox/src/main.ts', { SANDBOX_PORT: String(sandboxPort), DATA_DIR: join(dir, 'sandbox') }, /sandbox listening/);
    const policyPorts = [await freePort(), await freePort()];
    const auditPorts = [await freePort(), await freePort()];
    const first = [sandbox.start()];
    for (const i of [0, 1]) {
      first.push(service(`policy-${i + 1}`, 'services/policy/src/main.ts', { GRPC_ADDRESS: `127.0.0.1:${policyPorts[i]}`, AUDIT_URL: `127.0.0.1:${auditPorts[i]}`, DATA_DIR: join(dir, `policy-${i + 1}`) }, /policy listening/).start());
      first.push(service(`audit-${i + 1}`, 'services/audit/src/main.ts', { GRPC_ADDRESS: `127.0.0.1:${auditPorts[i]}`, CLICKHOUSE_URL: clickhouse.url, DATA_DIR: join(dir, `audit-${i + 1}`) }, /audit listening/).start());
    }
    await Promise.all(first);

    const upstreams = Object.fromEntries(connectors.map((c) => [`UPSTREAM_${c.key.toUpperCase()}_URL`, `${sandboxUrl}/${c.key}/mcp`]));
    const gateways: string[] = [];
    for (const i of [0, 1]) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      gateways.push(url);
      await service(`gateway-${i + 1}`, 'services/gateway/src/main.ts', {
        ...upstreams, PORT: String(port), PUBLIC_URL: url, DATA_DIR: join(dir, `gateway-${i + 1}`), MAIL_URL: `file://${outboxDir}`,
        POLICY_URL: `127.0.0.1:${policyPorts[i]}`, AUDIT_URL: `127.0.0.1:${auditPorts[i]}`, AUDIT_RECORD_TIMEOUT_MS: '3000',
      }, /gateway listening/).start();
    }
    const database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dir });
    return {
      gateways, sandboxUrl, outboxDir, clickhouseUrl: clickhouse.url, clickhouseOutput: () => clickhouse.process.output(), streamLeaders: () => streamLeadersOf(natsUrl), natsUrl, database, members,
      async stop() {
        for (const stop of stops.reverse()) await stop().catch(() => undefined);
        await database.close();
        await testDb.drop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await testDb.drop();
    throw err;
  }
}
