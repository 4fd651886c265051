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
