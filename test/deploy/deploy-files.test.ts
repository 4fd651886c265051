import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { AUDIT_CONFIG_VARIABLES } from '@portcullis/audit';
import { GATEWAY_CONFIG_VARIABLES } from '@portcullis/gateway';
import { POLICY_CONFIG_VARIABLES } from '@portcullis/policy';
import { repoRoot } from '../support/processes.ts';

/**
 * The deploy files, validated offline (no Docker engine or cluster here): they parse, every
 * service and dependency the README names is there, and every variable, port and address
 * agrees with what each service's configuration schema reads and listens on.
 */
const read = (path: string) => readFileSync(join(repoRoot, path), 'utf8');

/** What each Portcullis process reads: its config schema, or the dashboard server's own four. */
const VARIABLES: Record<string, readonly string[]> = {
  'start:gateway': GATEWAY_CONFIG_VARIABLES,
  'start:policy': POLICY_CONFIG_VARIABLES,
  'start:audit': AUDIT_CONFIG_VARIABLES,
  'web/build/index.js': ['HOST', 'PORT', 'ORIGIN', 'PORTCULLIS_GATEWAY_URL'],
};
const roleOf = (command: string[]) => Object.keys(VARIABLES).find((k) => command.join(' ').includes(k));
const portOf = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1));

interface ComposeService { image?: string; build?: unknown; command?: string[]; environment?: Record<string, string>; depends_on?: string[] | Record<string, unknown>; deploy?: { replicas?: number }; expose?: string[]; ports?: string[] }

describe('docker-compose.yml', () => {
  const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, ComposeService>; volumes: Record<string, unknown> };
  const services = compose.services;
  const portcullis = Object.entries(services).filter(([, s]) => s.command && roleOf(s.command));

  it('names every service and dependency the README lists: Postgres, a 3-node NATS cluster, ClickHouse, 2x gateway, policy and audit, the dashboard', () => {
    expect(Object.keys(services).sort()).toEqual(['audit', 'clickhouse', 'gateway', 'nats-1', 'nats-2', 'nats-3', 'policy', 'postgres', 'web']);
    for (const name of ['gateway', 'policy', 'audit']) expect(services[name]!.deploy?.replicas, name).toBe(2);
    const readme = read('README.md');
    for (const script of ['start:gateway', 'start:policy', 'start:audit']) expect(readme).toContain(`npm run ${script}`);
    for (const dependency of ['DATABASE_URL', 'NATS_URL', 'CLICKHOUSE_URL']) expect(readme).toContain(dependency);
  });

  it('sets only variables each service reads, and every Portcullis service runs the one image', () => {
    expect(portcullis.map(([name]) => name).sort()).toEqual(['audit', 'gateway', 'policy', 'web']);
    for (const [name, service] of portcullis) {
      expect(service.image, name).toBe('portcullis:local');
      const known = VARIABLES[roleOf(service.command!)!]!;
      const unknown = Object.keys(service.environment ?? {}).filter((v) => !known.includes(v));
      expect(unknown, `${name} sets variables it never reads`).toEqual([]);
    }
  });

  it('wires addresses and ports consistently, and every dependency exists', () => {
    const env = (name: string) => services[name]!.environment!;
    expect(portOf(env('gateway').POLICY_URL!)).toBe(portOf(env('policy').GRPC_ADDRESS!));
    expect(env('gateway').POLICY_URL!.split(':')[0]).toBe('policy');
    expect(portOf(env('gateway').AUDIT_URL!)).toBe(portOf(env('audit').GRPC_ADDRESS!));
    expect(env('policy').AUDIT_URL).toBe(env('gateway').AUDIT_URL);
    expect(services.gateway!.expose).toContain(env('gateway').PORT);
    expect(env('web').PORTCULLIS_GATEWAY_URL).toBe(`http://gateway:${env('gateway').PORT}`);
    expect(services.web!.ports).toEqual([`${env('web').PORT}:${env('web').PORT}`]);
    expect(env('audit').CLICKHOUSE_URL).toBe('http://clickhouse:8123');
    for (const name of ['gateway', 'policy', 'audit']) {
      expect(env(name).NATS_URL!.split(',')).toEqual(['nats://nats-1:4222', 'nats://nats-2:4222', 'nats://nats-3:4222']);
      expect(env(name).NATS_REPLICAS).toBe('3');
      expect(env(name).NODE_ENV).toBe('production');
    }
    for (const [name, service] of Object.entries(services)) {
      const deps = Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {});
      for (const dep of deps) expect(Object.keys(services), `${name} depends on ${dep}`).toContain(dep);
    }
    // The NATS nodes route to each other as one cluster.
    for (const node of ['nats-1', 'nats-2', 'nats-3']) {
      const args = services[node]!.command!.join(' ');
      expect(args).toContain('-js');
      expect(args).toContain('--cluster_name portcullis');
      for (const other of ['nats-1', 'nats-2', 'nats-3'].filter((n) => n !== node)) expect(args).toContain(`nats://${other}:6222`);
    }
  });
});

describe('deploy/Dockerfile', () => {
  const dockerfile = read('deploy/Dockerfile');

  it('installs every workspace, builds the dashboard, and exposes every port the services use', () => {
    const workspaces = ['services/core', 'services/gateway', 'services/policy', 'services/audit', 'services/sandbox', 'services/standalone', 'web'];
    expect(readdirSync(join(repoRoot, 'services')).map((d) => `services/${d}`).concat('web').sort()).toEqual([...workspaces].sort());
    for (const ws of workspaces) expect(dockerfile).toContain(`COPY ${ws}/package.json ${ws}/`);
    expect(dockerfile).toMatch(/^FROM node:20/m);
    expect(dockerfile).toContain('RUN npm run build:web');
    expect(dockerfile).toContain('COPY --from=build /app/web/build web/build');
    const exposed = /^EXPOSE (.+)$/m.exec(dockerfile)![1]!.split(/\s+/).map(Number);
    expect(exposed).toEqual(expect.arrayContaining([8080, 50051, 50052, 3000, 9464]));
    expect(dockerfile).toContain('USER node');
  });
});

describe('deploy/k8s', () => {
  const docs = readdirSync(join(repoRoot, 'deploy/k8s')).filter((f) => f.endsWith('.yaml')).sort()
    .flatMap((f) => parseAllDocuments(read(`deploy/k8s/${f}`)).map((d) => d.toJSON() as any));
  const byKind = (kind: string) => docs.filter((d) => d.kind === kind);
  const configMap = byKind('ConfigMap')[0].data as Record<string, string>;
  const secret = byKind('Secret')[0].stringData as Record<string, string>;

  it('runs 2 replicas of gateway, policy, audit and the dashboard, and a 3-node NATS cluster', () => {
    const replicas = Object.fromEntries(byKind('Deployment').map((d) => [d.metadata.name, d.spec.replicas]));
    expect(replicas).toEqual({ policy: 2, audit: 2, gateway: 2, web: 2 });
    const nats = byKind('StatefulSet').find((s) => s.metadata.name === 'nats');
    expect(nats.spec.replicas).toBe(3);
    expect(configMap.NATS_URL!.split(',')).toHaveLength(3);
    expect(configMap.NATS_REPLICAS).toBe('3');
  });

  it('gives each container only variables its service reads; ports, probes and Services line up', () => {
    for (const deployment of byKind('Deployment')) {
      const [container] = deployment.spec.template.spec.containers;
      const role = roleOf(container.command)!;
      expect(role, deployment.metadata.name).toBeDefined();
      const fromShared = (container.envFrom ?? []).flatMap((source: any) => Object.keys(source.configMapRef ? configMap : secret));
      const own = (container.env ?? []).map((e: any) => e.name);
      const unknown = [...own].filter((v) => !VARIABLES[role]!.includes(v));
      expect(unknown, `${deployment.metadata.name} sets variables it never reads`).toEqual([]);
      // Shared config may carry variables another service reads, but never one nobody reads.
      const everyone = new Set(Object.values(VARIABLES).flat());
      expect(fromShared.filter((v: string) => !everyone.has(v))).toEqual([]);
      if (role === 'web/build/index.js') expect(container.envFrom ?? [], 'the dashboard gets no secrets').toEqual([]);

      const listens = (container.env ?? []).find((e: any) => e.name === 'GRPC_ADDRESS' || e.name === 'PORT');
      const port = listens.name === 'PORT' ? Number(listens.value) : portOf(listens.value);
      expect(container.ports.map((p: any) => p.containerPort)).toContain(port);
      const service = byKind('Service').find((s) => s.metadata.name === deployment.metadata.name);
      expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
      expect(deployment.spec.template.metadata.labels).toMatchObject(deployment.spec.selector.matchLabels);
      expect(service.spec.ports[0].port).toBe(port);
      if (container.readinessProbe) expect(container.ports.map((p: any) => p.name)).toContain(container.readinessProbe.httpGet.port);
    }
    const gateway = byKind('Deployment').find((d) => d.metadata.name === 'gateway').spec.template.spec.containers[0].env;
    const value = (name: string) => gateway.find((e: any) => e.name === name).value as string;
    expect(value('POLICY_URL')).toBe('policy:50051');
    expect(value('AUDIT_URL')).toBe('audit:50052');
    // gRPC balances over every pod of a headless Service.
    for (const name of ['policy', 'audit']) expect(byKind('Service').find((s) => s.metadata.name === name).spec.clusterIP).toBe('None');
  });
});
