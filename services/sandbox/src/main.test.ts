import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const mainScript = fileURLToPath(new URL('./main.ts', import.meta.url));
const dataDirs: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];

afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dataDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function runMain(env: Record<string, string>): ChildProcessWithoutNullStreams {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandbox-main-'));
  dataDirs.push(dataDir);
  // Only what the sandbox reads, so the test runner's own environment cannot leak in.
  const child = spawn(process.execPath, ['--import', 'tsx', mainScript], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, SANDBOX_PORT: '0', ...env },
  });
  children.push(child);
  return child;
}

function outputOf(child: ChildProcessWithoutNullStreams): { stdout: () => string; stderr: () => string } {
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return { stdout: () => stdout, stderr: () => stderr };
}

function exitOf(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

function listeningUrl(child: ChildProcessWithoutNullStreams): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const match = /^sandbox listening on (http:\/\/\S+)$/m.exec(seen);
      if (match) resolve(match[1] as string);
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code} before listening`)));
  });
}

describe('sandbox main', () => {
  it('refuses to start in production', async () => {
    const child = runMain({ NODE_ENV: 'production', PORTCULLIS_SECRET: 'x'.repeat(32) });
    const output = outputOf(child);
    expect(await exitOf(child)).toBe(1);
    expect(output.stderr()).toContain('refusing to start with NODE_ENV=production');
    expect(output.stdout()).not.toContain('listening');
  });

  it('names a bad variable and exits', async () => {
    const child = runMain({ NODE_ENV: 'development', SANDBOX_PORT: 'ninety' });
    const output = outputOf(child);
    expect(await exitOf(child)).toBe(1);
    expect(output.stderr()).toContain('SANDBOX_PORT');
  });

  it('prints its URL, serves, and exits 0 on SIGTERM', async () => {
    const child = runMain({ NODE_ENV: 'development' });
    const url = await listeningUrl(child);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/_sandbox/health`)).status).toBe(200);
    // Without PORTCULLIS_SECRET the secret is generated once and kept under DATA_DIR.
    expect(existsSync(join(dataDirs[0] as string, 'secret'))).toBe(true);
    const exited = exitOf(child);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
