import { latestMailTo } from './dashboard-session.ts';

export interface ApiResponse { status: number; body: any; headers: Headers; text: string }

/**
 * A browser-less client of the REST API: keeps its session cookie, sends the gateway's
 * Origin (as the dashboard would), does not follow redirects, and keeps every response
 * text it saw (`seen`) so tests can scan them for secrets.
 */
export function apiClient(baseUrl: string, seen: string[] = []) {
  let cookie = '';
  const call = async (method: string, path: string, body?: unknown): Promise<ApiResponse> => {
    const res = await fetch(path.startsWith('http') ? path : `${baseUrl}${path}`, {
      method,
      redirect: 'manual',
      headers: { origin: baseUrl, ...(cookie ? { cookie } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const setCookie = res.headers.get('set-cookie');
    if (setCookie) cookie = setCookie.split(';')[0]!;
    const text = await res.text();
    seen.push(text, res.headers.get('location') ?? '');
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    return { status: res.status, body: parsed as any, headers: res.headers, text };
  };
  return { call, get cookie() { return cookie; } };
}

export type ApiClient = ReturnType<typeof apiClient>;

/** Signs `email` in through the magic-link flow, reading the code from the `file://` outbox. */
export async function signInThroughOutbox(api: ApiClient, outboxDir: string, email: string): Promise<{ user: { id: string }; mfaRequired: boolean }> {
  const requested = await api.call('POST', '/api/auth/magic-link', { email });
  if (requested.status !== 202) throw new Error(`magic-link answered ${requested.status}: ${requested.text}`);
  const { code } = latestMailTo(outboxDir, email);
  const verified = await api.call('POST', '/api/auth/verify', { email, code });
  if (verified.status !== 200) throw new Error(`verify answered ${verified.status}: ${verified.text}`);
  return verified.body;
}
