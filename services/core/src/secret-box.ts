import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Encryption at rest under the server secret (`PORTCULLIS_SECRET`), for secrets the server
 * itself must read back: TOTP secrets, owner OAuth-app secrets, webhook secrets. Each use has
 * its own label, so a value sealed for one purpose cannot be opened as another.
 */
function keyFor(serverSecret: string, label: string): Buffer {
  return Buffer.from(hkdfSync('sha256', serverSecret, 'portcullis-secret-box-v1', label, 32));
}

export function sealWithSecret(serverSecret: string, label: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFor(serverSecret, label), iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['sb1', iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
}

/** Opens a value from `sealWithSecret`; throws when the secret, label or data do not match. */
export function openWithSecret(serverSecret: string, label: string, sealed: string): string {
  const [version, iv, body, tag] = sealed.split('.');
  if (version !== 'sb1' || !iv || body === undefined || !tag) throw new Error('unrecognised sealed value');
  const decipher = createDecipheriv('aes-256-gcm', keyFor(serverSecret, label), Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}
