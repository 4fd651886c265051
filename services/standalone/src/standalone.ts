import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectors, openBus, openDatabase, openDurableMemoryBus, readPrivateFile, resolveSecret, sealWithSecret, writePrivateFile, type Bus, type DatabaseHandle } from '@portcullis/core';
import { CLIENT_SECRET_LABEL, loadGatewayConfig, startGateway, type Gateway } from '@portcullis/gateway';
import { loadPolicyConfig, startPolicyService, compilePolicyText } from '@portcullis/policy';
import { loadAuditConfig, startAuditService } from '@portcullis/audit';
import { startSandbox, type Sandbox } from '@portcullis/sandbox';
import { loadDashboard } from './dashboard.ts';
import { seedDemo } from './demo-seed.ts';

export interface Standalone {
  gateway: Gateway;
  sandbox: Sandbox | undefined;
  demoMemberKey: string | undefined;
  banner: string;
  /** Stops taking calls, writes every pending audit entry, then releases everything. */
  close(): Promise<void>;
}

const DEMO_KEY_FILE = 'demo-member-key';
/** The in-process bus's audit log, under DATA_DIR (decision 070). */
const AUDIT_LOG_DIR = 'audit-log';

/**
 * The single-process composition root: gateway, policy and audit in one process, still
 * talking through gRPC on loopback and through the bus, plus the sandbox connectors and the
 * demo seed outside production.
 */
export async function startStandalone(env: NodeJS.ProcessEnv): Promise<Standalone> {
  const nodeEnv = env.NODE_ENV ?? 'development';
  const dataDir = env.DATA_DIR ?? './data';
  const secret = resolveSecret({ NODE_ENV: nodeEnv, DATA_DIR: dataDir, PORTCULLIS_SECRET: env.PORTCULLIS_SECRET });
  const production = nodeEnv === 'production';

  // gRPC between the services of this one process runs over unix sockets: same protocol and
  // code path as split mode, without the loopback TCP stack.
  mkdirSync(dataDir, { recursive: true });
  const socketDir = mkdtempSync(join(tmpdir(), 'portcullis-'));
  const auditAddress = `unix:${join(socketDir, 'audit.sock')}`;
  // The policy service starts before audit; its audit client (Simulate) connects on first use.
  const policyConfig = loadPolicyConfig({ ...env, GRPC_ADDRESS: `unix:${join(socketDir, 'policy.sock')}`, AUDIT_URL: auditAddress });
  const auditConfig = loadAuditConfig({ ...env, GRPC_ADDRESS: auditAddress });
  // Validate the gateway's config (startup guard included) before anything starts.
  loadGatewayConfig(env, secret);

  const cleanups: Array<() => Promise<void>> = [async () => rmSync(socketDir, { recursive: true, force: true })];
  const closeAll = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };

  try {
    const database: DatabaseHandle = await openDatabase({ DATABASE_URL: env.DATABASE_URL, DATA_DIR: dataDir });
    cleanups.push(() => database.close());
    // Without NATS the bus is in-process; its audit entries are kept in a local log under DATA_DIR
    // (written before a call goes upstream, synced within 10 ms, replayed after a crash: decision 070).
    const bus: Bus = env.NATS_URL
      ? await openBus({ NATS_URL: env.NATS_URL, NATS_SUBJECT_PREFIX: env.NATS_SUBJECT_PREFIX }, 'standalone')
      : openDurableMemoryBus({ dir: join(dataDir, AUDIT_LOG_DIR), report: (message, err) => process.stderr.write(`${message}${err ? `: ${err instanceof Error ? err.message : String(err)}` : ''}\n`) });
    cleanups.push(() => bus.close());

    let sandbox: Sandbox | undefined;
    const upstreamOverrides: Record<string, string> = {};
    if (!production) {
      sandbox = await startSandbox({ host: '127.0.0.1', port: Number(env.SANDBOX_PORT ?? 0), secret });
      cleanups.push(() => sandbox!.close());
      for (const c of connectors) {
        const key = `UPSTREAM_${c.key.toUpperCase()}_URL`;
        if (!env[key]) upstreamOverrides[key] = sandbox.upstreamUrl(c.key);
      }
    }

    const policy = await startPolicyService(policyConfig, { db: database.db, bus });
    cleanups.push(() => policy.close());
    const audit = await startAuditService(auditConfig, { bus, sinks: { db: database.db, serverSecret: secret } });
    cleanups.push(() => audit.close());

    const gatewayConfig = loadGatewayConfig({ ...env, ...upstreamOverrides, POLICY_URL: policy.address, AUDIT_URL: audit.address }, secret);
    const dashboard = env.PORTCULLIS_DASHBOARD === 'off' ? undefined : await loadDashboard(env.WEB_BUILD_DIR);
    const gateway = await startGateway(gatewayConfig, { db: database.db, bus, dbPing: database.ping, ...(dashboard ? { dashboard } : {}) });
    cleanups.push(() => gateway.close());

    let demoMemberKey: string | undefined;
    if (sandbox) {
      const sb = sandbox;
      const seeded = await seedDemo(database.db, {
        issueToken: (service, identity) => sb.issueToken(service, identity),
        cedarOf: compilePolicyText,
        registerApp: (service) => sb.registerApp(service, [`${gateway.url.replace(/\/$/, '')}/api/oauth/callback`], 'Portcullis demo'),
        sealClientSecret: (clientSecret) => sealWithSecret(secret, CLIENT_SECRET_LABEL, clientSecret),
      });
      // The demo member key, like the generated secret, is readable by its owner only (0600).
      const keyFile = join(dataDir, DEMO_KEY_FILE);
      if (seeded) writePrivateFile(keyFile, seeded.memberKey + '\n');
      demoMemberKey = readPrivateFile(keyFile);
    }

    const banner = renderBanner({ url: gateway.url, mailUrl: gatewayConfig.MAIL_URL!, demoMemberKey, embedded: { db: database.kind, bus: bus.kind, audit: env.CLICKHOUSE_URL ? 'clickhouse' : 'chdb' } });
    return {
      gateway,
      sandbox,
      demoMemberKey,
      banner,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

function renderBanner(o: { url: string; mailUrl: string; demoMemberKey: string | undefined; embedded: { db: string; bus: string; audit: string } }): string {
  const mailHint = o.mailUrl === 'log'
    ? 'the code is printed in this log'
    : o.mailUrl.startsWith('file://') ? `the code is written to ${o.mailUrl}` : 'the code is e-mailed';
  const lines = [
    '',
    '  Portcullis is running',
    '',
    `  Dashboard   ${o.url}/`,
    `  MCP         ${o.url}/mcp`,
    `  Sign in     POST ${o.url}/api/auth/magic-link {"email":"demo@portcullis.local"}; ${mailHint}`,
  ];
  if (o.demoMemberKey) {
    lines.push(
      `  Member key  ${o.demoMemberKey}`,
      '              (demo agent: GitHub, Slack and Linear connected to the sandbox; destructive GitHub tools forbidden)',
      `  Try it      point any MCP client at ${o.url}/mcp with header "Authorization: Bearer <member key>"`,
    );
  }
  lines.push(`  Back ends   database=${o.embedded.db} bus=${o.embedded.bus} audit=${o.embedded.audit}`, '');
  return lines.join('\n');
}
