import { describe, expect, it } from 'vitest';
import { createMemberVault, openSealed, rewrapMemberVault, sealToMember, unwrapPrivateKey, VaultError } from './vault.ts';
import { generateMemberKey } from './keys.ts';

describe('sealed token vault', () => {
  const memberId = '0b8f6f7e-0000-4000-8000-000000000001';

  it('opens a sealed token only with the member key the vault was made with', () => {
    const key = generateMemberKey();
    const vault = createMemberVault(memberId, key);
    const sealed = sealToMember(vault.publicKey, '{"accessToken":"t0ken"}');
    expect(sealed).not.toContain('t0ken');
    expect(openSealed(unwrapPrivateKey(memberId, vault.wrappedPrivateKey, key), sealed)).toBe('{"accessToken":"t0ken"}');
    expect(() => unwrapPrivateKey(memberId, vault.wrappedPrivateKey, generateMemberKey())).toThrow(VaultError);
    expect(() => unwrapPrivateKey('another-member', vault.wrappedPrivateKey, key)).toThrow(VaultError);
  });

  it('keeps sealed tokens readable across a rotation that presents the old key', () => {
    const oldKey = generateMemberKey();
    const newKey = generateMemberKey();
    const vault = createMemberVault(memberId, oldKey);
    const sealed = sealToMember(vault.publicKey, 'secret');
    const rewrapped = rewrapMemberVault(memberId, vault.wrappedPrivateKey, oldKey, newKey);
    expect(openSealed(unwrapPrivateKey(memberId, rewrapped, newKey), sealed)).toBe('secret');
    expect(() => unwrapPrivateKey(memberId, rewrapped, oldKey)).toThrow(VaultError);
  });

  it('rejects tampered sealed values', () => {
    const key = generateMemberKey();
    const vault = createMemberVault(memberId, key);
    const sealed = sealToMember(vault.publicKey, 'secret');
    const tampered = sealed.slice(0, -3) + (sealed.endsWith('A') ? 'BBB' : 'AAA');
    expect(() => openSealed(unwrapPrivateKey(memberId, vault.wrappedPrivateKey, key), tampered)).toThrow(VaultError);
  });
});
