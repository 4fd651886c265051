import { describe, expect, it } from 'vitest';
import { redactToolArgs, REDACTED } from './redact.ts';

describe('redactToolArgs', () => {
  it('redacts secret-looking keys at any depth and credential-looking values anywhere', () => {
    const out = redactToolArgs({
      owner: 'acme',
      password: 'hunter2',
      nested: { api_key: 'x', list: ['ghp_abcdefghijklmnopqrstuvwxyz0123', 'plain'] },
      body: 'no secret here',
    });
    expect(out).toEqual({
      owner: 'acme',
      password: REDACTED,
      nested: { api_key: REDACTED, list: [REDACTED, 'plain'] },
      body: 'no secret here',
    });
  });
});
