import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';

/**
 * 400 `invalid_request` from route schemas names the failing field for the dashboard's forms
 * (decision 039): `details.field`/`in`/`issue` for the first, `details.issues` for every one.
 */
describe('validation errors name every failing field', () => {
  let h: ApiHarness;
  let owner: string;
  let agentId: string;
  beforeAll(async () => {
    h = await createApiHarness();
    owner = await h.signIn('validation-owner@example.com');
    agentId = (await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Forms' }, cookie: owner })).json().id;
  });
  afterAll(async () => { await h?.close(); });

  type Details = { field: string; in: string; issue: string; issues: Array<{ field: string; issue: string }> };

  it('lists each failing body field once, the first also as `field`, with what is wrong', async () => {
    const res = await h.request({
      method: 'POST', url: `/api/agents/${agentId}/policies`, cookie: owner,
      payload: { name: 7, service: 'github', effect: 'maybe', principal: { type: 'all_members' }, tools: 'delete_repository' },
    });
    expect(res.statusCode, res.body).toBe(400);
    const { error } = res.json() as { error: { code: string; message: string; details: Details } };
    expect(error.code).toBe('invalid_request');
    expect(error.details.in).toBe('body');
    const fields = error.details.issues.map((i) => i.field);
    expect(fields).toEqual(expect.arrayContaining(['name', 'effect', 'tools']));
    expect(new Set(fields).size).toBe(fields.length);
    expect(error.details.field).toBe(fields[0]);
    expect(error.details.issue).toBe(error.details.issues[0]!.issue);
    expect(error.message).toBe(`Invalid body field "${error.details.field}": ${error.details.issue}`);
    for (const i of error.details.issues) expect(i.issue).toMatch(/\S/);
  });

  it('names unknown fields one by one in `issues`', async () => {
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/status`, cookie: owner, payload: { status: 'active', colour: 'red', owner: 'me' } });
    expect(res.statusCode).toBe(400);
    const { details, message } = (res.json() as { error: { message: string; details: Details } }).error;
    expect(message).toBe('Unknown field(s) in body: colour, owner');
    expect(details).toMatchObject({ field: 'colour, owner', in: 'body', issue: 'is not a known field' });
    expect(details.issues).toEqual([{ field: 'colour', issue: 'is not a known field' }, { field: 'owner', issue: 'is not a known field' }]);
  });

  it('names query and path fields too', async () => {
    const query = await h.request({ method: 'GET', url: '/api/agents?limit=abc', cookie: owner });
    expect(query.statusCode).toBe(400);
    expect((query.json() as { error: { details: Details } }).error.details).toMatchObject({ field: 'limit', in: 'querystring', issues: [{ field: 'limit' }] });
    const path = await h.request({ method: 'GET', url: '/api/agents/not-a-uuid/members', cookie: owner });
    expect(path.statusCode).toBe(400);
    expect((path.json() as { error: { details: Details } }).error.details).toMatchObject({ field: 'id', in: 'params', issue: 'must be a UUID' });
  });
});
