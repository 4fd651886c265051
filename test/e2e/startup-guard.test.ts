import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTs } from '../support/processes.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'pc-guard-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function refusal(entry: string, env: Record<string, string>) {
  const proc = startTs(entry, { DATA_DIR: dataDir, PORT: '0', ...env });
  const code = await new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
  return { code, output: proc.output() };
}

const secret = 'x'.repeat(40);

describe('startup guard: dangerous configuration is refused, naming the variable', () => {
  it('refuses MAIL_URL=log in production', async () => {
    const { code, output } = await refusal('services/standalone/src/main.ts', { NODE_ENV: 'production', MAIL_URL: 'log', PORTCULLIS_SECRET: secret, PUBLIC_URL: 'https://p.example' });
    expect(code).toBe(1);
    expect(output).toMatch(/MAIL_URL: "log" would print sign-in codes/);
    expect(output).not.toMatch(/\n\s+at /); // a message, not a stack trace
  });

  it('refuses a missing PORTCULLIS_SECRET in production', async () => {
    const { code, output } = await refusal('services/gateway/src/main.ts', { NODE_ENV: 'production', MAIL_URL: `file://${dataDir}/outbox`, PUBLIC_URL: 'https://p.example' });
    expect(code).toBe(1);
    expect(output).toMatch(/PORTCULLIS_SECRET: required when NODE_ENV=production/);
  });

  it('refuses to run the sandbox in production', async () => {
    const { code, output } = await refusal('services/sandbox/src/main.ts', { NODE_ENV: 'production', PORTCULLIS_SECRET: secret });
    expect(code).toBe(1);
    expect(output).toMatch(/production/i);
  });

  it('names the offending variable when a value is malformed', async () => {
    const { code, output } = await refusal('services/gateway/src/main.ts', { PORT: 'eighty', PORTCULLIS_SECRET: secret });
    expect(code).toBe(1);
    expect(output).toMatch(/PORT:/);
  });

  it('the split services require NATS_URL and DATABASE_URL', async () => {
    const gateway = await refusal('services/gateway/src/main.ts', { PORTCULLIS_SECRET: secret });
    expect(gateway.code).toBe(1);
    expect(gateway.output).toMatch(/DATABASE_URL: required/);
    const audit = await refusal('services/audit/src/main.ts', { PORTCULLIS_SECRET: secret });
    expect(audit.code).toBe(1);
    expect(audit.output).toMatch(/NATS_URL/);
  });
});
