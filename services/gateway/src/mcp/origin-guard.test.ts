import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '@portcullis/core';
import { loadGatewayConfig } from '../config.ts';
import { createOriginCheck, isLoopbackHostname, type McpOriginPolicy } from './origin-guard.ts';

/** Issue 15 item 3: `/mcp` validates `Origin` (and `Host` when bound to loopback) — decision 024. */
describe('/mcp origin and host check', () => {
  const policy: McpOriginPolicy = {
    publicUrl: 'https://portcullis.example.com', allowedOrigins: ['https://ide.example.com'], allowLoopbackOrigins: true, listenHost: '127.0.0.1',
  };
  const served = (headers: Record<string, string>, overrides: Partial<McpOriginPolicy> = {}) =>
    createOriginCheck({ ...policy, ...overrides })({ host: '127.0.0.1:8080', ...headers }) === undefined;

  it.each([
    [{}, true],
    [{ origin: 'https://portcullis.example.com' }, true],
    [{ origin: 'https://ide.example.com' }, true],
    [{ origin: 'http://localhost:5173' }, true],
    [{ origin: 'http://127.0.0.1:6274' }, true],
    [{ origin: 'http://[::1]:3000' }, true],
    [{ origin: 'http://evil.example' }, false],
    [{ origin: 'null' }, false],
    [{ origin: 'http://portcullis.example.com' }, false], // another scheme is another origin
    [{ origin: 'https://portcullis.example.com.evil.example' }, false],
    [{ origin: 'http://localhost.evil.example' }, false],
    [{ origin: 'file://' }, false],
    [{ origin: 'not a url' }, false],
  ])('Origin %j → served %s', (headers, expected) => {
    expect(served(headers)).toBe(expected);
  });

  it('refuses loopback origins in production unless they are the public URL\'s or listed', () => {
    expect(served({ origin: 'http://localhost:5173' }, { allowLoopbackOrigins: false })).toBe(false);
    expect(served({ origin: 'http://localhost:5173' }, { allowLoopbackOrigins: false, allowedOrigins: ['http://localhost:5173'] })).toBe(true);
    expect(served({ origin: 'http://localhost:8080' }, { allowLoopbackOrigins: false, publicUrl: 'http://localhost:8080' })).toBe(true);
  });

  it('bound to loopback, answers only for loopback names and the public host (any port)', () => {
    for (const host of ['127.0.0.1:8080', 'localhost:8080', 'localhost', '[::1]:8080', '127.0.0.2', 'portcullis.example.com', 'PORTCULLIS.example.com:443']) {
      expect(served({ host }), host).toBe(true);
    }
    for (const host of ['evil.example', 'evil.example:8080', '127.0.0.1.evil.example', '', 'bad host']) {
      expect(served({ host }), host).toBe(false);
    }
    expect(createOriginCheck(policy)({})).toMatch(/host/);
  });

  it('bound to every interface, leaves Host to the balancer and still checks Origin', () => {
    expect(served({ host: 'gateway:8080' }, { listenHost: '0.0.0.0' })).toBe(true);
    expect(served({ host: 'gateway:8080', origin: 'http://evil.example' }, { listenHost: '0.0.0.0' })).toBe(false);
  });

  it('names what it refused, clipped', () => {
    expect(createOriginCheck(policy)({ host: 'localhost', origin: 'http://evil.example' })).toMatch(/origin "http:\/\/evil\.example".*MCP_ALLOWED_ORIGINS/);
    expect(createOriginCheck(policy)({ host: `${'a'.repeat(500)}.example` })!.length).toBeLessThan(300);
  });

  it('knows loopback names', () => {
    expect(['localhost', 'LOCALHOST', '127.0.0.1', '127.1.2.3', '::1', '[::1]'].every(isLoopbackHostname)).toBe(true);
    expect(['0.0.0.0', '10.0.0.1', 'example.com', '::', '128.0.0.1'].some(isLoopbackHostname)).toBe(false);
  });
});

describe('MCP_ALLOWED_ORIGINS', () => {
  const load = (value: string | undefined) => loadGatewayConfig({ NODE_ENV: 'test', ...(value !== undefined ? { MCP_ALLOWED_ORIGINS: value } : {}) }, randomBytes(32).toString('base64url'));

  it('reads a comma-separated list of origins, normalised as browsers send them', () => {
    expect(load(undefined).MCP_ALLOWED_ORIGINS).toEqual([]);
    expect(load('').MCP_ALLOWED_ORIGINS).toEqual([]);
    expect(load(' https://IDE.example.com/ , http://localhost:5173,https://a.example:443').MCP_ALLOWED_ORIGINS)
      .toEqual(['https://ide.example.com', 'http://localhost:5173', 'https://a.example']);
  });

  it.each(['https://ide.example.com/path', 'ide.example.com', 'null', '*', 'ftp://x.example', 'https://u:p@x.example', 'https://x.example?q'])('refuses %j at boot, naming the variable', (value) => {
    expect(() => load(value)).toThrow(ConfigError);
    expect(() => load(value)).toThrow(/MCP_ALLOWED_ORIGINS/);
  });
});
