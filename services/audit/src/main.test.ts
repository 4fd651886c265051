import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { makeTempDir } from './testing/audit-entries.ts';
import { deleteAuditStream } from './testing/nats-streams.ts';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));
const dir = makeTempDir('main');
const prefix = uniqueSubjectPrefix('audit_main');

afterAll(async () => {
  await deleteAuditStream(TEST_NATS_URL, prefix);
  dir.remove();
});

/** Runs `npm run start:audit`'s entry point as its own process (tsx via --import). */
function startMain(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATA_DIR: dir.path, GRPC_ADDRESS: '127.0.0.1:0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const output = () => ({ stdout, stderr });
  return { child, exited, output };
}

describe('split-mode entry (services/audit/src/main.ts)', () => {
  it('refuses to start without NATS_URL, naming the variable', async () => {
    const run = startMain({});
    expect(await run.exited).toBe(1);
    expect(run.output().stderr).toMatch(/NATS_URL: required/);
  });

  it('refuses an invalid CLICKHOUSE_URL, naming the variable', async () => {
    const run = startMain({ NATS_URL: TEST_NATS_URL, CLICKHOUSE_URL: 'clickhouse.internal:8123' });
    expect(await run.exited).toBe(1);
    expect(run.output().stderr).toMatch(/CLICKHOUSE_URL: must be an http:\/\/ or https:\/\/ URL/);
  });

  it('listens, prints its address and exits 0 on SIGTERM', async () => {
    const run = startMain({ NATS_URL: TEST_NATS_URL, NATS_SUBJECT_PREFIX: prefix });
    const deadline = Date.now() + 60_000;
    while (!/audit listening on 127\.0\.0\.1:\d+/.test(run.output().stdout)) {
      if (Date.now() > deadline || run.child.exitCode !== null) throw new Error(`did not start: ${JSON.stringify(run.output())}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
  });
});
