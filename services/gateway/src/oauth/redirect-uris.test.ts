import { describe, expect, it } from 'vitest';
import { redirectUriProblem } from './redirect-uris.ts';

describe('redirectUriProblem: https anywhere, http only to loopback (decision 051)', () => {
  it('accepts https and loopback http on any port', () => {
    for (const uri of ['https://app.example.com/cb', 'https://localhost/cb', 'http://localhost:8080/callback', 'http://127.0.0.1:33418/cb?x=1', 'http://[::1]:9/cb']) {
      expect(redirectUriProblem(uri), uri).toBeUndefined();
    }
  });

  it('refuses other http hosts, custom schemes, fragments, credentials and junk, saying why', () => {
    expect(redirectUriProblem('http://evil.example.com/cb')).toMatch(/loopback/);
    expect(redirectUriProblem('http://127.0.0.2.nip.io/cb')).toMatch(/loopback/);
    expect(redirectUriProblem('cursor://callback')).toMatch(/https/);
    expect(redirectUriProblem('javascript:alert(1)')).toMatch(/https/);
    expect(redirectUriProblem('https://app.example.com/cb#frag')).toMatch(/fragment/);
    expect(redirectUriProblem('https://user:pw@app.example.com/cb')).toMatch(/credentials/);
    expect(redirectUriProblem('/relative')).toMatch(/absolute/);
    expect(redirectUriProblem(`https://a.example/${'x'.repeat(2000)}`)).toMatch(/longer/);
  });
});
