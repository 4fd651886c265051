import { describe, expect, it } from 'vitest';
import { ApiError } from '../../web/src/lib/api/api-error.ts';
import { apiErrorOf } from '../../web/src/lib/api/client.ts';
import { fieldErrorsOf, fieldLabel, formatWait, messageOf } from '../../web/src/lib/api/errors.ts';

/** Issue 18 item 5: the API's errors reach people as sentences, never as validation or route text. */
describe('readable API errors', () => {
  const invalid = (field: string, issue: string) =>
    new ApiError(400, 'invalid_request', `Invalid body field "${field}": ${issue}`, { field, in: 'body' }, 'req-1');

  it('validation text becomes a sentence about the field, beside the field too', () => {
    const err = invalid('code', 'must be the 6 digits from the authenticator app');
    expect(messageOf(err)).toBe('Code must be the 6 digits from the authenticator app.');
    expect(fieldErrorsOf(err)).toEqual({ code: 'Code must be the 6 digits from the authenticator app.' });
    expect(messageOf(invalid('name', 'Too small: expected string to have >=1 characters'))).toBe('Name must not be empty.');
    expect(messageOf(invalid('email', 'Invalid email address'))).toBe('Email must be a valid e-mail address.');
    expect(messageOf(invalid('conditions.timeWindow.timeZone', 'Invalid input: expected string, received undefined'))).toBe('Time zone is required.');
    expect(messageOf(invalid('clientId', 'Too big: expected string to have <=500 characters'))).toBe('Client ID must be at most 500 characters.');
    expect(messageOf(invalid('limit', 'something zod says one day'))).toBe('Limit is not valid.');
    expect(fieldLabel('conditions.args.0.pattern')).toBe('Pattern');
  });

  it('never shows an API path, a route-not-found text, or a raw unknown-field complaint', () => {
    const mfa = new ApiError(403, 'forbidden', 'Complete the MFA challenge first (POST /api/auth/mfa/verify).', { reason: 'mfa_required' });
    expect(messageOf(mfa)).not.toMatch(/\/api\//);
    expect(messageOf(new ApiError(404, 'not_found', 'No route for GET /api/nope'))).not.toMatch(/\/api\/|No route/);
    expect(messageOf(new ApiError(409, 'conflict', 'Already a member (see /api/agents/x/members).'))).toBe('Already a member.');
    expect(messageOf(new ApiError(400, 'invalid_request', 'Unknown field(s) in body: extra', { field: 'extra', in: 'body' }))).not.toMatch(/Unknown field/);
  });

  it('reads the request id and Retry-After of a failed answer; a 429 counts down', () => {
    const res = new Response('', { status: 429, headers: { 'retry-after': '42' } });
    const err = apiErrorOf(res, { error: { code: 'rate_limited', message: 'Too many sign-in attempts.', requestId: 'abc-123' } });
    expect(err.requestId).toBe('abc-123');
    expect(err.retryAfterSeconds).toBe(42);
    expect(err.retryable).toBe(true);
    expect(messageOf(err)).toBe('Too many attempts. Wait 42 s, then try again.');
    expect(formatWait(3600 + 300)).toBe('1 h 5 min');
    const detailed = apiErrorOf(new Response('', { status: 429 }), { error: { code: 'rate_limited', message: 'x', details: { retryAfterSeconds: 3600 } } });
    expect(detailed.retryAfterSeconds).toBe(3600);
    expect(apiErrorOf(new Response('', { status: 404 }), { error: { code: 'not_found', message: 'Agent not found.' } }).retryable).toBe(false);
  });
});

describe('messages handlers wrote for people', () => {
  it('are kept as they are, beside their field too', () => {
    const err = new ApiError(400, 'invalid_request', 'The code does not match. Check the time on your phone.', { field: 'code' });
    expect(messageOf(err)).toBe('The code does not match. Check the time on your phone.');
    expect(fieldErrorsOf(err)).toEqual({ code: 'The code does not match. Check the time on your phone.' });
  });
});

describe('every field a 400 names', () => {
  it('gets its own sentence (details.issues, decision 039)', () => {
    const err = new ApiError(400, 'invalid_request', 'Invalid body field "clientId": Too small: expected string to have >=1 characters', {
      field: 'clientId', in: 'body', issue: 'Too small: expected string to have >=1 characters',
      issues: [{ field: 'clientId', issue: 'Too small: expected string to have >=1 characters' }, { field: 'clientSecret', issue: 'Invalid input: expected string, received undefined' }],
    });
    expect(fieldErrorsOf(err)).toEqual({ clientId: 'Client ID must not be empty.', clientSecret: 'Client secret is required.' });
  });
});
