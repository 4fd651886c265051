import { authStatus } from './api/account.ts';
import type { AuthStatus } from './api/types.ts';

/** Who is signed in, shared by every page; `refresh()` asks the gateway again. */
export const session = $state<{ status: AuthStatus | undefined; loading: boolean }>({ status: undefined, loading: true });

export async function refreshSession(): Promise<AuthStatus> {
  session.loading = true;
  try {
    session.status = await authStatus();
    return session.status;
  } finally {
    session.loading = false;
  }
}

/**
 * What a signed-in session must do before anything else: pass its MFA challenge (`verify`) or
 * set MFA up (`enrol`, when MFA is required and not on yet); undefined once it may use the
 * dashboard. The gateway refuses every other call meanwhile (403 `mfa_required`).
 */
export function pendingStep(status: AuthStatus | undefined): 'verify' | 'enrol' | undefined {
  if (!status?.authenticated) return undefined;
  if (status.mfa.enabled && !status.mfa.satisfied) return 'verify';
  if (status.mfa.required && !status.mfa.enabled) return 'enrol';
  return undefined;
}

/** A `next=` target that stays on this site (a path, never `//host` or a scheme); else undefined. */
export function safeNext(next: string | null | undefined): string | undefined {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return undefined;
  if (next.startsWith('/sign-in')) return undefined;
  return next;
}
