import { api } from './client.ts';
import type { DashboardSession, MfaSetup } from './types.ts';

export async function listDashboardSessions(): Promise<DashboardSession[]> {
  return (await api.get<{ sessions: DashboardSession[] }>('/api/users/me/sessions')).sessions;
}

/** Ends one of the user's dashboard sessions (ending the current one signs this browser out). */
export function endDashboardSession(sessionId: string): Promise<void> {
  return api.delete(`/api/users/me/sessions/${encodeURIComponent(sessionId)}`);
}

export function signOut(): Promise<unknown> {
  return api.post('/api/auth/logout');
}

/** Starts (or restarts) enrolment: a new pending secret; MFA stays off until `verifyMfaSetup`. */
export function startMfaSetup(): Promise<MfaSetup> {
  return api.post<MfaSetup>('/api/auth/mfa/setup');
}

/** Turns MFA on with a code from the new authenticator; answers the backup codes, shown once. */
export async function verifyMfaSetup(code: string): Promise<string[]> {
  return (await api.post<{ backupCodes: string[] }>('/api/auth/mfa/verify-setup', { code: code.trim() })).backupCodes;
}
