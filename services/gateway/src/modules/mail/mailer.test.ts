import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SMTPServer } from 'smtp-server';
import { createMailer } from './mailer.ts';

describe('mailer', () => {
  const received: Array<{ to: string[]; raw: string }> = [];
  let server: SMTPServer;
  let port: number;

  beforeAll(async () => {
    server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, session, callback) {
        let raw = '';
        stream.on('data', (chunk: Buffer) => { raw += chunk.toString(); });
        stream.on('end', () => { received.push({ to: session.envelope.rcptTo.map((r) => r.address), raw }); callback(); });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.server.address() as { port: number }).port;
  });
  afterAll(async () => { await new Promise<void>((resolve) => server.close(() => resolve())); });

  it('delivers through a real SMTP server for smtp:// URLs', async () => {
    const mailer = createMailer(`smtp://127.0.0.1:${port}?ignoreTLS=true`, 'Portcullis <no-reply@portcullis.test>', () => undefined);
    await mailer.send({ to: 'ada@example.com', subject: 'Your code', text: 'Your sign-in code is 12345678.' });
    expect(received).toHaveLength(1);
    expect(received[0]!.to).toEqual(['ada@example.com']);
    expect(received[0]!.raw).toContain('Subject: Your code');
    expect(received[0]!.raw).toContain('12345678');
  });

  it('writes one JSON file per message for file:// URLs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pc-mail-'));
    try {
      const mailer = createMailer(`file://${dir}`, 'x', () => undefined);
      await mailer.send({ to: 'bob@example.com', subject: 's', text: 't', code: '1', link: 'http://l' });
      const files = readdirSync(dir);
      expect(files).toHaveLength(1);
      expect(JSON.parse(readFileSync(join(dir, files[0]!), 'utf8'))).toMatchObject({ to: 'bob@example.com', code: '1', link: 'http://l' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('prints messages for log', async () => {
    const lines: string[] = [];
    await createMailer('log', 'x', (l) => lines.push(l)).send({ to: 'c@example.com', subject: 'hello', text: 'body' });
    expect(lines.join('\n')).toContain('c@example.com');
  });
});
