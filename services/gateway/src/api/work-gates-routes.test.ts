import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness } from '../testing/api-harness.ts';

/**
 * The API's turns for heavy work (issue 29 part 3, decision 069) on the real gateway: an audit
 * service that accepts connections and never answers (a stalled dependency) keeps each turn
 * taken for as long as the test needs, so who waits and who is refused is deterministic.
 */
let h: ApiHarness;
let stalled: Server;
const sockets = new Set<Socket>();

beforeAll(async () => {
  stalled = createServer((socket) => { sockets.add(socket); socket.on('error', () => undefined); });
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
  const { port } = stalled.address() as { port: number };
  h = await createApiHarness({
    AUDIT_URL: `127.0.0.1:${port}`,
    AUDIT_READS_AT_ONCE: '2', AUDIT_READS_PER_USER: '1', EXPORTS_PER_USER: '1', SIMULATIONS_PER_USER: '1',
    WORK_QUEUE_PER_USER: '1', WORK_MAX_WAIT_MS: '1500',
  });
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  stalled?.close();
  await h?.close();
});

describe('turns for heavy API work', () => {
  it('queues a user\'s second audit read, refuses the third with 429 and Retry-After, and lets another user through', async () => {
    const [b, a] = [await h.signIn('gate-b@example.com'), await h.signIn('gate-a@example.com')];
    const read = (cookie: string) => h.request({ method: 'GET', url: '/api/audit', cookie });
    const first = read(b);
    await new Promise((r) => setTimeout(r, 100));
    const second = read(b);
    await new Promise((r) => setTimeout(r, 100));
    const third = await read(b);
    expect(third.statusCode).toBe(429);
    expect(third.headers['retry-after']).toBe('1');
    expect(third.json().error.code).toBe('rate_limited');
    expect(third.json().error.message).toMatch(/Too many audit reads at once for this user/);
    // Another user has a turn of their own (two at once in all): it reaches the audit service.
    const other = read(a);
    await new Promise((r) => setTimeout(r, 100));
    // B's queued read waited its longest and was refused; B's first and A's still hold their turns.
    const queued = await second;
    expect(queued.statusCode).toBe(429);
    expect(queued.json().error.message).toMatch(/on this server/);
    void first; void other;
  }, 15_000);

  it('gives exports turns of their own, apart from reads', async () => {
    const c = await h.signIn('gate-c@example.com');
    const exporting = h.request({ method: 'GET', url: '/api/audit/export', cookie: c });
    await new Promise((r) => setTimeout(r, 100));
    // C's audit reads are not held up by C's export.
    const read = h.request({ method: 'GET', url: '/api/audit', cookie: c });
    await new Promise((r) => setTimeout(r, 100));
    const secondExport = h.request({ method: 'GET', url: '/api/audit/export', cookie: c });
    await new Promise((r) => setTimeout(r, 100));
    const thirdExport = await h.request({ method: 'GET', url: '/api/audit/export', cookie: c });
    expect(thirdExport.statusCode).toBe(429);
    expect(thirdExport.json().error.message).toMatch(/Too many exports at once/);
    void exporting; void read; void secondExport;
  }, 15_000);
});
