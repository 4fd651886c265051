import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header carrying a webhook sink request's signature (decision 056). */
export const SINK_SIGNATURE_HEADER = 'portcullis-signature';
/** How far a receiver should let a signature's timestamp be from its own clock. */
export const SINK_SIGNATURE_TOLERANCE_SECONDS = 300;

const hmacHex = (secret: string, timestamp: number, body: string) =>
  createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" under the sink's secret>`: the
 * timestamp is signed with the body, so a receiver that refuses old timestamps refuses replays.
 */
export function signSinkBody(secret: string, body: string, nowSeconds = Math.floor(Date.now() / 1000)): string {
  return `t=${nowSeconds},v1=${hmacHex(secret, nowSeconds, body)}`;
}

/**
 * What a receiver does (and the tests do): parse the header, refuse a timestamp outside the
 * tolerance, compare the HMAC in constant time. Several `v1=` values may be present (kept for
 * secret rotation on the receiving side); one match is enough.
 */
export function verifySinkSignature(secret: string, header: string | undefined, body: string, options: { nowSeconds?: number; toleranceSeconds?: number } = {}): boolean {
  if (!header) return false;
  const parts = header.split(',').map((p) => p.trim().split('=', 2) as [string, string | undefined]);
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t)) return false;
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (options.toleranceSeconds ?? SINK_SIGNATURE_TOLERANCE_SECONDS)) return false;
  const expected = Buffer.from(hmacHex(secret, t, body), 'hex');
  return parts.some(([k, v]) => {
    if (k !== 'v1' || !v || !/^[0-9a-f]{64}$/i.test(v)) return false;
    return timingSafeEqual(Buffer.from(v, 'hex'), expected);
  });
}
