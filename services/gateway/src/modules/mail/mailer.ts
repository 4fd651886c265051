import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** Machine-readable parts, written by the `file://` transport for tests and local trials. */
  code?: string;
  link?: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

/**
 * `MAIL_URL`: `smtp://…` (a real server), `file://<dir>` (each message a JSON file), or
 * `log` (printed; refused in production by the startup guard).
 */
export function createMailer(mailUrl: string, from: string, log: (line: string) => void): Mailer {
  if (mailUrl === 'log') {
    return { async send(m) { log(`mail to ${m.to}: ${m.subject}\n${m.text}`); } };
  }
  if (mailUrl.startsWith('file://')) {
    const dir = fileURLToPath(mailUrl);
    mkdirSync(dir, { recursive: true });
    return {
      async send(m) {
        const name = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}.json`;
        writeFileSync(join(dir, name), JSON.stringify({ from, ...m }, null, 2));
      },
    };
  }
  let transport: Promise<{ sendMail(options: Record<string, unknown>): Promise<unknown> }> | undefined;
  return {
    async send(m) {
      transport ??= import('nodemailer').then((nm) => nm.default.createTransport(mailUrl));
      await (await transport).sendMail({ from, to: m.to, subject: m.subject, text: m.text });
    },
  };
}
