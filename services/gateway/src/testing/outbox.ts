import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface OutboxMessage { to: string; subject: string; text: string; code?: string; link?: string }

/** Every message the `file://` mail transport wrote, oldest first. */
export function readOutbox(outboxDir: string): OutboxMessage[] {
  let files: string[];
  try { files = readdirSync(outboxDir).filter((f) => f.endsWith('.json')).sort(); } catch { return []; }
  return files.map((f) => JSON.parse(readFileSync(join(outboxDir, f), 'utf8')) as OutboxMessage);
}

/** The newest message to `to`; throws when there is none. */
export function latestMail(outboxDir: string, to: string): OutboxMessage & { code: string; link: string } {
  const message = readOutbox(outboxDir).reverse().find((m) => m.to === to);
  if (!message) throw new Error(`no mail to ${to} in ${outboxDir}`);
  return message as OutboxMessage & { code: string; link: string };
}
