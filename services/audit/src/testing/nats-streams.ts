import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';

/** Removes the AUDIT stream a test created under `subjectPrefix` (named as the NATS bus names it). */
export async function deleteAuditStream(url: string, subjectPrefix: string): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`${subjectPrefix.replace(/[^A-Za-z0-9_-]/g, '_')}AUDIT`).catch(() => undefined);
  } finally {
    await nc.close();
  }
}
