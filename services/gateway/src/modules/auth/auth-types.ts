/** Who must enrol in MFA (`MFA_REQUIRED`): nobody, users who own an agent, or everyone. */
export type MfaPolicy = 'off' | 'owners' | 'all';

/**
 * Why a session may reach only the MFA routes, status and logout:
 * `mfa_required` — the user has MFA on and this session has not passed it yet;
 * `mfa_enrolment_required` — `MFA_REQUIRED` says this user must use MFA and they have not set it up.
 */
export type MfaPendingReason = 'mfa_required' | 'mfa_enrolment_required';

export interface MfaState {
  /** The user has a confirmed TOTP authenticator. */
  enabled: boolean;
  /** This session passed an MFA check (a TOTP or backup code, or the enrolment itself). */
  satisfied: boolean;
  /** `MFA_REQUIRED` makes MFA mandatory for this user. */
  required: boolean;
  /** Set when the session is MFA pending; null when it may use the whole API. */
  pending: MfaPendingReason | null;
}

export interface SignedInUser { id: string; email: string }

/** The user behind a live dashboard session, as `requireUser` puts it on `request.user`. */
export interface SessionUser extends SignedInUser {
  sessionId: string;
  /** Same as `mfa.satisfied`. */
  mfaSatisfied: boolean;
  mfa: MfaState;
}

/** One live dashboard session as `GET /api/users/me/sessions` lists it. */
export interface DashboardSessionView {
  id: string;
  createdAt: string;
  lastSeenAt: string;
  expiresAt: string;
  ip: string | null;
  userAgent: string | null;
}

/** Combines what the account and the session say into the session's MFA state. */
export function mfaStateOf(input: { mfaEnabled: boolean; mfaSatisfied: boolean; ownsAgent: boolean }, policy: MfaPolicy): MfaState {
  const required = policy === 'all' || (policy === 'owners' && input.ownsAgent);
  const satisfied = input.mfaSatisfied;
  let pending: MfaPendingReason | null = null;
  if (input.mfaEnabled && !satisfied) pending = 'mfa_required';
  else if (!input.mfaEnabled && required) pending = 'mfa_enrolment_required';
  return { enabled: input.mfaEnabled, satisfied, required, pending };
}
