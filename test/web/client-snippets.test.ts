import { describe, expect, it } from 'vitest';
import { clientSetups, KEY_PLACEHOLDER, serverNameOf, shellWord } from '../../web/src/lib/setup/client-snippets.ts';

/** The setup page's client configuration (decision 046): the real URL, both ways in, never a key. */
const URL_HTTPS = 'https://gate.example.com/mcp';

describe('client setup snippets', () => {
  const setups = clientSetups(URL_HTTPS, 'Support Desk (EU)');
  const byId = Object.fromEntries(setups.map((s) => [s.id, s]));

  it('covers Claude Code, Claude Desktop, Cursor, VS Code and the MCP Inspector, each for OAuth and for the key header', () => {
    expect(setups.map((s) => s.id).sort()).toEqual(['claude-code', 'claude-desktop', 'cursor', 'inspector', 'vscode']);
    for (const setup of setups) {
      for (const way of ['oauth', 'key'] as const) {
        expect(setup.steps[way].length, `${setup.id} ${way}`).toBeGreaterThan(0);
        expect(setup.snippets[way].some((s) => s.text.includes(URL_HTTPS)), `${setup.id} ${way}`).toBe(true);
        for (const snippet of setup.snippets[way]) if (snippet.language === 'json') expect(() => JSON.parse(snippet.text)).not.toThrow();
      }
      // OAuth needs nothing but the URL: no header, no placeholder.
      expect(setup.snippets.oauth.map((s) => s.text).join('\n')).not.toMatch(/Authorization|pcm_/);
    }
  });

  it('the key way carries a placeholder (or a prompt), never anything shaped like a real key', () => {
    for (const setup of setups) {
      const text = setup.snippets.key.map((s) => s.text).join('\n');
      expect(text).toMatch(/Authorization/);
      expect(text.match(/pcm_[A-Za-z0-9_-]+/g) ?? []).toEqual(setup.id === 'vscode' ? [] : [KEY_PLACEHOLDER]);
    }
  });

  it('writes each client\'s documented format', () => {
    expect(byId['claude-code']!.snippets.oauth[0]!.text).toBe(`claude mcp add --transport http portcullis-support-desk-eu ${URL_HTTPS}`);
    expect(byId['claude-code']!.snippets.key[0]!.text).toBe(`claude mcp add --transport http portcullis-support-desk-eu ${URL_HTTPS} --header 'Authorization: Bearer ${KEY_PLACEHOLDER}'`);
    expect(JSON.parse(byId.cursor!.snippets.oauth[0]!.text)).toEqual({ mcpServers: { 'portcullis-support-desk-eu': { url: URL_HTTPS } } });
    expect(JSON.parse(byId.cursor!.snippets.key[0]!.text)).toEqual({ mcpServers: { 'portcullis-support-desk-eu': { url: URL_HTTPS, headers: { Authorization: `Bearer ${KEY_PLACEHOLDER}` } } } });
    expect(byId.cursor!.snippets.key[0]!.file).toBe('.cursor/mcp.json');
    expect(JSON.parse(byId.vscode!.snippets.oauth[0]!.text)).toEqual({ servers: { 'portcullis-support-desk-eu': { type: 'http', url: URL_HTTPS } } });
    const vscodeKey = JSON.parse(byId.vscode!.snippets.key[0]!.text);
    expect(vscodeKey.servers['portcullis-support-desk-eu']).toEqual({ type: 'http', url: URL_HTTPS, headers: { Authorization: 'Bearer ${input:portcullis-key}' } });
    expect(vscodeKey.inputs).toEqual([{ type: 'promptString', id: 'portcullis-key', description: 'Portcullis member key (pcm_…)', password: true }]);
    expect(byId.vscode!.snippets.key[0]!.file).toBe('.vscode/mcp.json');
    // Claude Desktop: a custom connector takes the URL; the key needs the mcp-remote bridge (no spaces inside args).
    expect(byId['claude-desktop']!.snippets.oauth[0]!.text).toBe(URL_HTTPS);
    expect(JSON.parse(byId['claude-desktop']!.snippets.key[0]!.text)).toEqual({ mcpServers: { 'portcullis-support-desk-eu': {
      command: 'npx', args: ['-y', 'mcp-remote', URL_HTTPS, '--header', 'Authorization:${PORTCULLIS_AUTH}'], env: { PORTCULLIS_AUTH: `Bearer ${KEY_PLACEHOLDER}` },
    } } });
    expect(byId.inspector!.snippets.key.map((s) => s.text)).toEqual(['npx @modelcontextprotocol/inspector', URL_HTTPS, `Authorization: Bearer ${KEY_PLACEHOLDER}`]);
  });

  it('a plain-http deployment tells mcp-remote to allow it', () => {
    const local = clientSetups('http://127.0.0.1:8080/mcp', 'x').find((s) => s.id === 'claude-desktop')!;
    expect(JSON.parse(local.snippets.key[0]!.text).mcpServers['portcullis-x'].args).toContain('--allow-http');
  });

  it('server names are one safe word; shell words are quoted only when needed', () => {
    expect(serverNameOf('Support Desk (EU)')).toBe('portcullis-support-desk-eu');
    expect(serverNameOf('  Ünïcödé — ops!! ')).toBe('portcullis-unicode-ops');
    expect(serverNameOf('***')).toBe('portcullis');
    expect(serverNameOf('x'.repeat(100))).toHaveLength('portcullis-'.length + 37);
    expect(serverNameOf('a'.repeat(36) + ' b')).toMatch(/^portcullis-a+$/);
    expect(shellWord('https://gate.example.com:8443/base/mcp')).toBe('https://gate.example.com:8443/base/mcp');
    expect(shellWord("it's here")).toBe(`'it'"'"'s here'`);
    expect(shellWord('a$(rm -rf)')).toBe(`'a$(rm -rf)'`);
  });
});
