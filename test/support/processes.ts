import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Settings that lift the tenant quotas (decision 069) for tests and benchmarks that load one
 * member key from one address far beyond what a real agent sends: they measure or break other
 * things. The quotas' own tests use the defaults or lower them.
 */
export const LOAD_TEST_QUOTAS: Record<string, string> = {
  MCP_RATE_PER_KEY: '1000000', MCP_RATE_BURST_PER_KEY: '1000000', MCP_RATE_PER_AGENT: '1000000', MCP_RATE_BURST_PER_AGENT: '1000000',
  MCP_AUTH_FAILURES_PER_IP_PER_MINUTE: '1000000',
};

/** A free TCP port on loopback (released before it is returned; good enough for tests). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface RunningProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of `pattern` in the output, waiting up to `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts a TypeScript entry point of the repo under Node with tsx's loader, as `npm start` does. */
export function startTs(entry: string, env: Record<string, string | undefined>, label = entry, nodeArgs: string[] = []): RunningProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, entry], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString();
    for (const w of waiters) w();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => { for (const w of waiters) w(); resolve(code); }));

  return {
    child,
    output: () => out,
    waitFor(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = out.match(pattern);
          if (match) { cleanup(); resolve(match); return; }
          if (child.exitCode !== null) { cleanup(); reject(new Error(`${label} exited (${child.exitCode}) before printing ${pattern}:\n${out}`)); }
        };
        const timer = setTimeout(() => { cleanup(); reject(new Error(`${label} did not print ${pattern} within ${timeoutMs} ms:\n${out}`)); }, timeoutMs);
        const cleanup = () => { clearTimeout(timer); waiters.delete(check); };
        waiters.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
