import { describe, expect, it } from 'vitest';
import { findSecretSpans, isSecretKey, looksLikeCredential, redactToolArgs, REDACTED } from './redact.ts';

describe('redactToolArgs', () => {
  it('redacts secret-looking keys at any depth and credential-looking values anywhere', () => {
    const out = redactToolArgs({
      owner: 'acme',
      password: 'hunter2',
      nested: { api_key: 'x', list: ['ghp_abcdefghijklmnopqrstuvwxyz0123456789', 'plain'] },
      body: 'no secret here',
    });
    expect(out).toEqual({
      owner: 'acme',
      password: REDACTED,
      nested: { api_key: REDACTED, list: [REDACTED, 'plain'] },
      body: 'no secret here',
    });
  });

  it('redacts a whole value that carries a credential inside prose', () => {
    const out = redactToolArgs({ body: 'deploy with AKIAIOSFODNN7EXAMPLF then rotate it' });
    expect(out).toEqual({ body: REDACTED });
  });
});

describe('isSecretKey', () => {
  it.each([
    'auth', 'bearer', 'pwd', 'session', 'signature', 'otp', 'pin', 'ssn',
    'password', 'passwd', 'token', 'accessToken', 'refresh_token', 'authToken', 'x-api-key', 'apiKey', 'API_KEY',
    'client_secret', 'clientSecret', 'privateKey', 'private_key', 'sessionId', 'Authorization', 'cookie',
    'aws_secret_access_key', 'cvv', 'user_pin', 'mfa_otp', 'webhook_signature', 'nextPageToken',
    'accesstoken', 'refreshtoken', 'apitoken', 'ACCESSTOKEN', 'dbpassword', 'pass', 'clientsecret',
  ])('%s names a secret', (key) => {
    expect(isSecretKey(key)).toBe(true);
  });

  it.each([
    'author', 'spinner', 'pinned', 'owner', 'repo', 'body', 'description', 'session_count_hint'.replace('session', 'lesson'),
    'keyId', 'key', 'keys', 'primary_location_hint', 'signed_off', 'options', 'path',
  ])('%s does not', (key) => {
    expect(isSecretKey(key)).toBe(false);
  });
});

describe('looksLikeCredential', () => {
  const fake = (prefix: string, length: number, alphabet = 'aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0z') =>
    prefix + Array.from({ length }, (_, i) => alphabet[(i * 7) % alphabet.length]).join('');

  it.each([
    ['AWS access key id', 'AKIAIOSFODNN7EXAMPLF'],
    ['AWS temporary key id', 'ASIAY34FZKBOKMUTVV7A'],
    ['GitHub classic PAT', fake('ghp_', 36)],
    ['GitHub OAuth token', fake('gho_', 36)],
    ['GitHub fine-grained PAT', fake('github_pat_', 82)],
    ['Slack bot token', 'xoxb-1234567890-1234567890123-abcdefghijABCDEFGHIJklmn'],
    ['Slack user token', 'xoxp-1234567890-1234567890-1234567890123-0123456789abcdef0123456789abcdef'],
    ['Stripe live key', fake('sk_live_', 24)],
    ['Stripe restricted key', fake('rk_live_', 24)],
    ['Stripe test key', fake('sk_test_', 24)],
    ['JWT', 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c'],
    ['PEM RSA private key', '-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----'],
    ['PEM PKCS8 private key', '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----'],
    ['OpenSSH private key', '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----'],
    ['PGP private key block', '-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----'],
    ['Hugging Face token', fake('hf_', 34, 'abcdefghijKLMNOPQRstuvwxyz')],
    ['Linear key', fake('lin_api_', 40)],
    ['OpenAI key', fake('sk-proj-', 48)],
    ['Anthropic key', fake('sk-ant-api03-', 90)],
    ['Google API key', fake('AIza', 35)],
    ['GitLab PAT', fake('glpat-', 20)],
    ['npm token', fake('npm_', 36)],
    ['Portcullis member key', fake('pcm_', 43)],
    ['Bearer header value', 'Bearer abcdefghijklmnop0123456789'],
    ['lower-case bearer header value', 'bearer abcdefghijklmnop0123456789'],
    ['URL with credentials', 'postgres://admin:s3cr3t@db.internal:5432/app'],
    ['Slack webhook URL', 'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX'],
  ])('%s', (_label, value) => {
    expect(looksLikeCredential(value)).toBe(true);
    expect(looksLikeCredential(`see ${value} here`)).toBe(true);
    // The same shapes as spans: found inside prose, the prose around them left out.
    const spans = findSecretSpans(`see ${value} here`);
    expect(spans).toHaveLength(1);
    expect(spans[0]!.start).toBeGreaterThanOrEqual(4);
    expect(spans[0]!.end).toBeLessThanOrEqual(4 + value.length);
  });

  it.each([
    'acme/infra', 'Fix the login bug', 'https://github.com/acme/infra/pull/12', 'a3f9c2e1d4b5a6978877665544332211ffeeddcc',
    'sk-', 'sk-learn-compatible-pipelines-for-teams', 'eyJ', 'AKIA', 'ghp_short', 'C0123456789', 'user@example.com', '2026-11-24T21:12:00Z',
  ])('%s is left alone', (value) => {
    expect(looksLikeCredential(value)).toBe(false);
  });

  it('stays linear on long adversarial input', () => {
    const adversarial = `${'-----BEGIN '.repeat(2_000)}${'ey'.repeat(20_000)}.${'a'.repeat(50_000)}`;
    expect(findSecretSpans(adversarial)).toEqual([]);
    const long = `${'-----BEGIN '.repeat(2_000)}${'ey'.repeat(20_000)}.${'a'.repeat(50_000)}`;
    expect(typeof looksLikeCredential(long)).toBe('boolean');
  });
});

describe('findSecretSpans', () => {
  const ghp = `ghp_${'aB3dE5gH7j'.repeat(3)}K9mN1p`;

  it('marks only the credential inside prose, with its public prefix, each one in order', () => {
    const text = `Delete every project and post the customer list publicly. ${ghp}`;
    const at = text.indexOf('ghp_');
    expect(findSecretSpans(text)).toEqual([{ start: at, end: text.length, kind: 'github-token', shown: 4 }]);
    const two = `push with ${ghp}, then Bearer abcdefghijklmnop0123456789 and AKIAIOSFODNN7EXAMPLF.`;
    expect(findSecretSpans(two).map((s) => [two.slice(s.start, s.end), s.kind, two.slice(s.start, s.start + s.shown)])).toEqual([
      [ghp, 'github-token', 'ghp_'],
      ['Bearer abcdefghijklmnop0123456789', 'authorization-header', 'Bearer '],
      ['AKIAIOSFODNN7EXAMPLF', 'aws-access-token', 'AKIA'],
    ]);
  });

  it('a URL keeps its scheme and host, only user:password is the span; a PEM block runs to its END line', () => {
    const url = 'connect to postgres://admin:s3cr3t@db.internal:5432/app now';
    const [span] = findSecretSpans(url);
    expect(url.slice(span!.start, span!.end)).toBe('admin:s3cr3t');
    const pem = 'key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nthanks';
    const [block] = findSecretSpans(pem);
    expect(pem.slice(block!.start, block!.end)).toBe('-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----');
    expect(block!.shown).toBe('-----BEGIN RSA PRIVATE KEY-----'.length);
    const open = 'x -----BEGIN PRIVATE KEY-----\nMIIE and no end';
    expect(findSecretSpans(open)[0]!.end).toBe(open.length);
  });

  it('finds nothing in plain text', () => {
    expect(findSecretSpans('Fix the login bug in acme/infra')).toEqual([]);
  });
});
