/** Hosts a native client listens on for its redirect (RFC 8252 §7.3). */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** True for an `http` URI to a loopback host: a native client on the member's own machine. */
export function isLoopbackHttp(uri: string): boolean {
  try {
    const url = new URL(uri);
    return url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
  } catch {
    return false;
  }
}

/** A C0 or C1 control character (NUL, BEL, DEL…): no URI a client registers carries one. */
export const CONTROL_CHARACTER = /\p{Cc}/u;

/** Most redirect URIs a client may register, and their longest length. */
export const MAX_REDIRECT_URIS = 10;
export const MAX_REDIRECT_URI_LENGTH = 2000;

/**
 * Why a client may not register `uri` as a redirect URI, or undefined when it may: `https`
 * anywhere, `http` only to a loopback host, nothing else (no custom schemes, no fragments).
 */
export function redirectUriProblem(uri: string): string | undefined {
  // The URL parser would percent-encode a NUL, but the text as registered is what is stored and compared.
  if (CONTROL_CHARACTER.test(uri)) return 'a redirect URI must not contain control characters';
  if (uri.length > MAX_REDIRECT_URI_LENGTH) return `a redirect URI is longer than ${MAX_REDIRECT_URI_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'a redirect URI is not an absolute URL';
  }
  if (url.hash) return 'a redirect URI must not have a fragment';
  if (url.username || url.password) return 'a redirect URI must not carry credentials';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return undefined;
  if (url.protocol === 'http:') return `http redirect URIs must point at a loopback host (localhost, 127.0.0.1, [::1]), not ${url.hostname}`;
  return `redirect URIs must use https (or http to a loopback host), not ${url.protocol.replace(/:$/, '')}`;
}

/**
 * RFC 9207: every authorization response names the issuer it comes from (`iss`), so that a
 * client talking to several authorization servers can tell which one answered (mix-up attacks).
 */
export function withIssuer(redirectUri: string, issuer: string): string {
  const url = new URL(redirectUri);
  url.searchParams.set('iss', issuer);
  return url.href;
}
