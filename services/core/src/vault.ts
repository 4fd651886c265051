import {
  createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, diffieHellman,
  generateKeyPairSync, hkdfSync, randomBytes, type KeyObject,
} from 'node:crypto';

/**
 * The sealed token vault (DESIGN.md, "Connection tokens"). Each member has an X25519 key
 * pair. The private key is stored wrapped under a key derived from the member key, which
 * the server never stores; connection tokens are sealed to the public key. A database dump
 * plus the server secret therefore reveals no upstream token.
 */

const VERSION = 'v1';

export interface MemberVault {
  /** X25519 public key, SPKI DER, base64. */
  publicKey: string;
  /** PKCS#8 private key sealed with AES-256-GCM under HKDF(member key). */
  wrappedPrivateKey: string;
}

/** Raised when a sealed value cannot be opened: wrong member key, or tampered data. */
export class VaultError extends Error {
  override readonly name = 'VaultError';
}

function wrappingKey(memberKey: string, memberId: string): Buffer {
  return Buffer.from(hkdfSync('sha256', memberKey, 'portcullis-vault-wrap-v1', memberId, 32));
}

function aesSeal(key: Buffer, plaintext: Buffer, aad: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return [VERSION, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
}

function aesOpen(key: Buffer, sealed: string, aad: string): Buffer {
  const [version, iv, body, tag] = sealed.split('.');
  if (version !== VERSION || !iv || body === undefined || !tag) throw new VaultError('unrecognised sealed value');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]);
  } catch {
    throw new VaultError('sealed value cannot be opened with this key');
  }
}

/** A new key pair for a member, its private half wrapped under `memberKey`. */
export function createMemberVault(memberId: string, memberKey: string): MemberVault {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  return {
    publicKey: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
    wrappedPrivateKey: aesSeal(wrappingKey(memberKey, memberId), privateKey.export({ format: 'der', type: 'pkcs8' }), memberId),
  };
}

/** Unwraps the member's private key; throws VaultError when `memberKey` is not the one it was wrapped under. */
export function unwrapPrivateKey(memberId: string, wrappedPrivateKey: string, memberKey: string): KeyObject {
  const der = aesOpen(wrappingKey(memberKey, memberId), wrappedPrivateKey, memberId);
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
}

/** Re-wraps the same private key under a new member key (key rotation that keeps connections). */
export function rewrapMemberVault(memberId: string, wrappedPrivateKey: string, oldKey: string, newKey: string): string {
  const privateKey = unwrapPrivateKey(memberId, wrappedPrivateKey, oldKey);
  return aesSeal(wrappingKey(newKey, memberId), privateKey.export({ format: 'der', type: 'pkcs8' }), memberId);
}

function sealKey(shared: Buffer, ephemeral: Buffer, recipient: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeral, recipient]), 'portcullis-seal-v1', 32));
}

/** Seals `plaintext` to a member's public key; only that member's private key opens it. */
export function sealToMember(publicKeyB64: string, plaintext: string): string {
  const recipientDer = Buffer.from(publicKeyB64, 'base64');
  const recipient = createPublicKey({ key: recipientDer, format: 'der', type: 'spki' });
  const eph = generateKeyPairSync('x25519');
  const ephDer = eph.publicKey.export({ format: 'der', type: 'spki' });
  const key = sealKey(diffieHellman({ privateKey: eph.privateKey, publicKey: recipient }), ephDer, recipientDer);
  return `${ephDer.toString('base64url')}~${aesSeal(key, Buffer.from(plaintext, 'utf8'), 'seal')}`;
}

/** Opens a value sealed by `sealToMember` with the member's unwrapped private key. */
export function openSealed(privateKey: KeyObject, sealed: string): string {
  const at = sealed.indexOf('~');
  if (at <= 0) throw new VaultError('unrecognised sealed value');
  const ephDer = Buffer.from(sealed.slice(0, at), 'base64url');
  const recipientDer = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  let shared: Buffer;
  try {
    shared = diffieHellman({ privateKey, publicKey: createPublicKey({ key: ephDer, format: 'der', type: 'spki' }) });
  } catch {
    throw new VaultError('sealed value cannot be opened with this key');
  }
  return aesOpen(sealKey(shared, ephDer, recipientDer), sealed.slice(at + 1), 'seal').toString('utf8');
}
