import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The newest message the `file://` mail transport wrote for `to`. */
export function latestMailTo(outboxDir: string, to: string): { code: string; link: string; subject: string } {
  const files = readdirSync(outboxDir).filter((f) => f.endsWith('.json')).sort();
  for (const file of files.reverse()) {
    const message = JSON.parse(readFileSync(join(outboxDir, file), 'utf8')) as { to: string; code: string; link: string; subject: string };
    if (message.to === to) return message;
  }
  throw new Error(`no mail to ${to} in ${outboxDir}`);
}

/** Signs in through the real magic-link flow, reading the code from the outbox; returns the cookie header. */
export async function signIn(baseUrl: string, outboxDir: string, email: string): Promise<string> {
  const requested = await fetch(`${baseUrl}/api/auth/magic-link`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }),
  });
  if (requested.status !== 202) throw new Error(`magic-link answered ${requested.status}: ${await requested.text()}`);
  const { code } = latestMailTo(outboxDir, email);
  const verified = await fetch(`${baseUrl}/api/auth/verify`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, code }),
  });
  if (verified.status !== 200) throw new Error(`verify answered ${verified.status}: ${await verified.text()}`);
  const setCookie = verified.headers.get('set-cookie') ?? '';
  return setCookie.split(';')[0]!;
}
