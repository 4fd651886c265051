import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliverToSink, SinkDeliveryError, type WebhookSinkBody } from './deliver.ts';
import { NO_ALLOWED_DESTINATIONS } from '../net/outbound-destination.ts';
import { otlpLogsBody } from './otlp-logs.ts';
import type { SinkEntry } from './sink-entry.ts';
import { otlpLogsUrl, sinkUrlProblem } from './sink-url.ts';
import { SINK_SIGNATURE_HEADER, signSinkBody, verifySinkSignature } from './webhook-signature.ts';

const entry: SinkEntry = {
  id: '0192d6a8-0000-7000-8000-000000000001', timestamp: '2026-11-26T10:00:00.123Z', agentId: 'agent-1', agentName: 'Agent', memberId: 'member-1',
  memberName: 'dana@example.com', user: 'dana@example.com', memberKeyId: 'key-1', sessionId: 'session-1', service: 'github', tool: 'github__get_me',
  action: 'GithubMCP::Action::"get_me"', resource: 'GithubMCP::Service::"github"', callerIp: '10.0.0.7', toolArgs: { q: 'x' }, decision: 'DENY',
  reason: 'Denied by policy "no"', matchedPolicyIds: ['p1'], matchedPolicyNames: ['no'], policyDbIds: ['db-1'], policyVersionIds: ['v1'], durationMs: 3, principal: 'Portcullis::Member::"member-1"',
};

/** Development: loopback allowed, nothing listed. */
const DEVELOPMENT = { production: false, allowed: NO_ALLOWED_DESTINATIONS };

describe('webhook signature (decision 056)', () => {
  it('verifies its own signature, and refuses another secret, another body and a stale timestamp', () => {
    const header = signSinkBody('s3cret-s3cret-s3cret', '{"a":1}', 1_800_000_000);
    expect(header).toMatch(/^t=1800000000,v1=[0-9a-f]{64}$/);
    expect(verifySinkSignature('s3cret-s3cret-s3cret', header, '{"a":1}', { nowSeconds: 1_800_000_100 })).toBe(true);
    expect(verifySinkSignature('another-secret-value', header, '{"a":1}', { nowSeconds: 1_800_000_100 })).toBe(false);
    expect(verifySinkSignature('s3cret-s3cret-s3cret', header, '{"a":2}', { nowSeconds: 1_800_000_100 })).toBe(false);
    expect(verifySinkSignature('s3cret-s3cret-s3cret', header, '{"a":1}', { nowSeconds: 1_800_000_301 })).toBe(false);
    expect(verifySinkSignature('s3cret-s3cret-s3cret', undefined, '{"a":1}')).toBe(false);
  });
});

describe('sink URLs (decision 058)', () => {
  it('are absolute http(s) URLs without credentials or a fragment (where they may point is the destination rule\'s)', () => {
    expect(sinkUrlProblem('https://siem.example.com/hook')).toBeUndefined();
    expect(sinkUrlProblem('http://127.0.0.1:8080/hook')).toBeUndefined();
    expect(sinkUrlProblem('ftp://example.com/x')).toMatch(/https/);
    expect(sinkUrlProblem('https://user:pw@example.com/')).toMatch(/password/);
    expect(sinkUrlProblem('https://example.com/#x')).toMatch(/fragment/);
    expect(sinkUrlProblem('not a url')).toMatch(/absolute URL/);
    expect(otlpLogsUrl('https://otel.example.com:4318')).toBe('https://otel.example.com:4318/v1/logs');
    expect(otlpLogsUrl('https://otel.example.com/otlp/')).toBe('https://otel.example.com/otlp/v1/logs');
    expect(otlpLogsUrl('https://otel.example.com/v1/logs')).toBe('https://otel.example.com/v1/logs');
  });
});

describe('OTLP logs body (decision 057)', () => {
  it('is one log record per entry, with the entry\'s time, a severity from its decision and its fields as attributes', () => {
    const body = JSON.parse(Buffer.from(otlpLogsBody([entry, { ...entry, id: 'id-2', decision: 'ALLOW' }])).toString('utf8'));
    const scope = body.resourceLogs[0].scopeLogs[0];
    expect(body.resourceLogs[0].resource.attributes).toContainEqual({ key: 'service.name', value: { stringValue: 'portcullis' } });
    expect(scope.scope.name).toBe('portcullis.audit');
    expect(scope.logRecords).toHaveLength(2);
    const [denied, allowed] = scope.logRecords;
    expect(denied.timeUnixNano).toBe('1795687200123000000');
    expect([denied.severityText, denied.severityNumber, allowed.severityText]).toEqual(['WARN', 13, 'INFO']);
    const attrs = Object.fromEntries(denied.attributes.map((a: { key: string; value: unknown }) => [a.key, a.value]));
    expect(attrs['portcullis.audit.id']).toEqual({ stringValue: entry.id });
    expect(attrs['portcullis.tool']).toEqual({ stringValue: 'github__get_me' });
    expect(attrs['portcullis.decision']).toEqual({ stringValue: 'DENY' });
    expect(attrs['client.address']).toEqual({ stringValue: '10.0.0.7' });
    expect(attrs['portcullis.tool_args']).toEqual({ stringValue: '{"q":"x"}' });
    expect(attrs['portcullis.policy.names']).toEqual({ arrayValue: { values: [{ stringValue: 'no' }] } });
    expect(attrs['portcullis.duration_ms']).toEqual({ intValue: 3 });
    expect(attrs).not.toHaveProperty('portcullis.shadow.decision');
  });

  it('carries the OAuth client and what shadow policies would have decided, when the entry has them', () => {
    const body = JSON.parse(Buffer.from(otlpLogsBody([{ ...entry, oauthClientId: 'client-9', shadowDecision: 'DENY', shadowPolicyIds: ['night-freeze'] }])).toString('utf8'));
    const record = body.resourceLogs[0].scopeLogs[0].logRecords[0];
    const attrs = Object.fromEntries(record.attributes.map((a: { key: string; value: unknown }) => [a.key, a.value]));
    expect(attrs['portcullis.oauth.client_id']).toEqual({ stringValue: 'client-9' });
    expect(attrs['portcullis.shadow.decision']).toEqual({ stringValue: 'DENY' });
    expect(attrs['portcullis.shadow.policy_ids']).toEqual({ arrayValue: { values: [{ stringValue: 'night-freeze' }] } });
    expect(attrs).not.toHaveProperty('portcullis.approval.id');
  });

  it('carries the call approval an entry is an event of, and who decided it (decision 063)', () => {
    const approvalId = '0190f1a2-0000-7000-8000-00000000a063';
    const body = JSON.parse(Buffer.from(otlpLogsBody([{ ...entry, approvalId, approvalEvent: 'approved', approverId: 'user-1', approverName: 'owner@example.com' }])).toString('utf8'));
    const attrs = Object.fromEntries(body.resourceLogs[0].scopeLogs[0].logRecords[0].attributes.map((a: { key: string; value: unknown }) => [a.key, a.value]));
    expect(attrs['portcullis.approval.id']).toEqual({ stringValue: approvalId });
    expect(attrs['portcullis.approval.event']).toEqual({ stringValue: 'approved' });
    expect(attrs['portcullis.approval.approver_id']).toEqual({ stringValue: 'user-1' });
    expect(attrs['portcullis.approval.approver_name']).toEqual({ stringValue: 'owner@example.com' });
  });
});

describe('deliverToSink against a real HTTP server', () => {
  let server: Server;
  let base: string;
  let answer = 200;
  const received: Array<{ headers: IncomingMessage['headers']; body: string; url: string }> = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        received.push({ headers: req.headers, body, url: req.url ?? '' });
        if (answer === 302) res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
        else res.writeHead(answer).end(answer === 200 ? '' : 'try later');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('signs a webhook request over its exact body, and names the status of a refusal without following redirects', async () => {
    const target = { kind: 'webhook' as const, id: 'sink-1', url: `${base}/hook`, secret: 'webhook-secret-123456' };
    await deliverToSink(target, [entry], DEVELOPMENT);
    const got = received.at(-1)!;
    expect(verifySinkSignature('webhook-secret-123456', got.headers[SINK_SIGNATURE_HEADER] as string, got.body)).toBe(true);
    const body = JSON.parse(got.body) as WebhookSinkBody;
    expect(body.sinkId).toBe('sink-1');
    expect(body.entries).toEqual([entry]);
    expect(got.body).not.toContain('webhook-secret-123456');

    // The status only: what the sink answered is not shown (it is not on SINK_ALLOWED_HOSTS).
    answer = 503;
    await expect(deliverToSink(target, [entry], DEVELOPMENT)).rejects.toThrow(new SinkDeliveryError('the sink answered HTTP 503'));
    answer = 302;
    await expect(deliverToSink(target, [entry], DEVELOPMENT)).rejects.toThrow(new SinkDeliveryError('the sink answered HTTP 302 (redirects are not followed)'));
    expect(received.filter((r) => r.url !== '/hook')).toEqual([]);
    answer = 200;
  });

  it('posts OTLP JSON to /v1/logs with the owner\'s headers', async () => {
    await deliverToSink({ kind: 'otlp', id: 'sink-2', url: base, headers: { 'x-api-key': 'k-123' } }, [entry], DEVELOPMENT);
    const got = received.at(-1)!;
    expect(got.url).toBe('/v1/logs');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-api-key']).toBe('k-123');
    expect(JSON.parse(got.body).resourceLogs[0].scopeLogs[0].logRecords).toHaveLength(1);
  });
});
