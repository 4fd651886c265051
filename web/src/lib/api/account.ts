import { call, http } from './client.ts';
import type { DashboardSession, MfaSetup } from './types.ts';

export async function listDashboardSessions(): Promise<DashboardSession[]> {
  return (await call(http.GET('/api/users/me/sessions'))).sessions;
}

/** Ends one of the user's dashboard sessions (ending the current one signs this browser out). */
export function endDashboardSession(sessionId: string): Promise<void> {
  return call(http.DELETE('/api/users/me/sessions/{id}', { params: { path: { id: sessionId } } })).then(() => undefined);
}

export function signOut(): Promise<unknown> {
  return call(http.POST('/api/auth/logout'));
}

/** Starts (or restarts) enrolment: a new pending secret; MFA stays off until `verifyMfaSetup`. */
export function startMfaSetup(): Promise<MfaSetup> {
  return call(http.POST('/api/auth/mfa/setup'));
}

/** Turns MFA on with a code from the new authenticator; answers the backup codes, shown once. */
export async function verifyMfaSetup(code: string): Promise<string[]> {
  return (await call(http.POST('/api/auth/mfa/verify-setup', { body: { code: code.trim() } }))).backupCodes;
}

/** Sign-in, step 1: e-mails a code and a link (the same answer whether or not the address is known). */
export const requestSignInCode = (email: string) => call(http.POST('/api/auth/magic-link', { body: { email } }));
/** Sign-in, step 2: the code with its address, or the e-mailed link's token. */
export const verifySignIn = (body: { email: string; code: string } | { token: string }) => call(http.POST('/api/auth/verify', { body }));
/** Sign-in, step 3 when MFA is on: the authenticator's code or a backup code. */
export const verifyMfa = (body: { code: string } | { backupCode: string }) => call(http.POST('/api/auth/mfa/verify', { body }));
export const authStatus = () => call(http.GET('/api/auth/status'));
