import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { AuthorizeRequest } from '@portcullis/core';
import { PolicyServiceError } from '../errors.ts';
import { readAuthorizeRequest } from './authorize.ts';
import { grpcStatusOf, toGrpcError } from './grpc-status.ts';

const request: AuthorizeRequest = {
  agentId: 'a', member: { id: 'm', role: 'member', status: 'approved', email: 'm@example.com' }, service: 'github', tool: 'get_me',
  toolArgsJson: '{"owner":"acme"}', sessionId: '', policyVersion: 3, nowMs: 1_700_000_000_123,
};

describe('readAuthorizeRequest', () => {
  it('reads the wire request into an evaluation input', () => {
    expect(readAuthorizeRequest(request, () => 0)).toEqual({
      agentId: 'a', member: request.member, service: 'github', tool: 'get_me', args: { owner: 'acme' }, nowMs: 1_700_000_000_123, sessionId: '',
    });
  });

  it('adds the clock offset to the instant, from now_ms or from the clock, and keeps the session id', () => {
    expect(readAuthorizeRequest({ ...request, sessionId: 's-1' }, () => 0, 3_600_000)).toMatchObject({ nowMs: 1_700_003_600_123, sessionId: 's-1' });
    expect(readAuthorizeRequest({ ...request, nowMs: 0 }, () => 1_000, -400)).toMatchObject({ nowMs: 600 });
  });

  it('takes the clock when now_ms is 0, and empty arguments when there are none', () => {
    expect(readAuthorizeRequest({ ...request, nowMs: 0, toolArgsJson: '' }, () => 42.7)).toMatchObject({ nowMs: 42, args: {} });
  });

  it.each([
    [{ agentId: '' }, 'agent_id is required'],
    [{ member: null as never }, 'member.id is required'],
    [{ service: '' }, 'service is required'],
    [{ tool: '' }, 'tool is required'],
    [{ toolArgsJson: '{oops' }, 'tool_args_json is not valid JSON'],
    [{ toolArgsJson: 'null' }, 'tool_args_json must be a JSON object'],
  ])('refuses %j: %s', (change, message) => {
    expect(() => readAuthorizeRequest({ ...request, ...change }, () => 0)).toThrow(new PolicyServiceError('invalid_request', message));
  });
});

describe('grpc status mapping', () => {
  it('gives each failure code its status and keeps the message', () => {
    expect(grpcStatusOf('invalid_request')).toBe(grpc.status.INVALID_ARGUMENT);
    expect(grpcStatusOf('unavailable')).toBe(grpc.status.UNAVAILABLE);
    expect(grpcStatusOf('not_implemented')).toBe(grpc.status.UNIMPLEMENTED);
    expect(toGrpcError(new PolicyServiceError('unavailable', 'The policy store cannot be read'))).toEqual({ code: grpc.status.UNAVAILABLE, details: 'The policy store cannot be read' });
  });

  it('answers anything else INTERNAL without its text', () => {
    const original = console.error;
    console.error = () => {};
    try {
      expect(toGrpcError(new Error('secret connection string'))).toEqual({ code: grpc.status.INTERNAL, details: 'The policy decision point failed unexpectedly' });
    } finally {
      console.error = original;
    }
  });
});
