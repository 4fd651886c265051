import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';

/**
 * Deletes every JetStream stream a test made under `subjectPrefix` (the audit stream and the
 * KV buckets' streams, named as the NATS bus names them), so runs leave the shared server clean.
 */
export async function deleteTestStreams(url: string, subjectPrefix: string): Promise<void> {
  const stem = subjectPrefix.replace(/[^A-Za-z0-9_-]/g, '_');
  if (!stem) return;
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(stem) || name.startsWith(`KV_${stem}`)) await jsm.streams.delete(name).catch(() => undefined);
    }
  } finally {
    await nc.close();
  }
}
