import { describe, expect, it } from 'vitest';
import { openWithSecret, sealWithSecret } from './secret-box.ts';

describe('secret box', () => {
  it('round-trips under the same secret and label only', () => {
    const sealed = sealWithSecret('s'.repeat(40), 'mfa', 'JBSWY3DPEHPK3PXP');
    expect(sealed).not.toContain('JBSWY3DPEHPK3PXP');
    expect(openWithSecret('s'.repeat(40), 'mfa', sealed)).toBe('JBSWY3DPEHPK3PXP');
    expect(() => openWithSecret('t'.repeat(40), 'mfa', sealed)).toThrow();
    expect(() => openWithSecret('s'.repeat(40), 'oauth-app', sealed)).toThrow();
  });
});
