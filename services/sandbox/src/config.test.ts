import { describe, expect, it } from 'vitest';
import { loadSandboxConfig } from './config.ts';

describe('sandbox config', () => {
  it('gives OAuth access tokens an hour unless SANDBOX_ACCESS_TOKEN_TTL_SECONDS says otherwise', () => {
    expect(loadSandboxConfig({}).SANDBOX_ACCESS_TOKEN_TTL_SECONDS).toBe(3600);
    expect(loadSandboxConfig({ SANDBOX_ACCESS_TOKEN_TTL_SECONDS: '5' }).SANDBOX_ACCESS_TOKEN_TTL_SECONDS).toBe(5);
  });

  it('names a lifetime that is not a positive whole number', () => {
    for (const value of ['0', '-1', '1.5', 'soon']) {
      expect(() => loadSandboxConfig({ SANDBOX_ACCESS_TOKEN_TTL_SECONDS: value }), value).toThrow(/SANDBOX_ACCESS_TOKEN_TTL_SECONDS/);
    }
  });
});
