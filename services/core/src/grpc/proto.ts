import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const protoRoot = fileURLToPath(new URL('../../../../proto', import.meta.url));

const loaderOptions: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [protoRoot],
};

function loadService(file: string, path: string[]): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync(file, loaderOptions);
  let node: unknown = grpc.loadPackageDefinition(definition);
  for (const part of path) node = (node as Record<string, unknown>)[part];
  return node as grpc.ServiceClientConstructor;
}

export const PolicyDecisionService = loadService('portcullis/policy/v1/policy.proto', ['portcullis', 'policy', 'v1', 'PolicyDecision']);
export const AuditQueryService = loadService('portcullis/audit/v1/audit.proto', ['portcullis', 'audit', 'v1', 'AuditQuery']);

/** Keeps connections warm on loopback and across a cluster; identical on both ends. */
export const channelOptions: grpc.ChannelOptions = {
  // Every address a name resolves to (several policy or audit replicas behind one DNS name) gets calls in turn.
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  // A restarted policy or audit service is reached again within about 2 s (grpc-js otherwise
  // backs off up to 2 min between reconnect attempts; meanwhile calls are denied as unavailable).
  'grpc.initial_reconnect_backoff_ms': 250,
  'grpc.max_reconnect_backoff_ms': 2_000,
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
};

/** Starts `server` on `address` (`host:port`, port 0 picks one, or `unix:/path`) and returns the bound address. */
export async function bindServer(server: grpc.Server, address: string): Promise<string> {
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  if (address.startsWith('unix:')) return address;
  const host = address.slice(0, address.lastIndexOf(':'));
  return `${host}:${port}`;
}
