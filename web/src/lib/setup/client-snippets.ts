// Copy-ready MCP client configuration for one agent (decision 046): Claude Desktop, Claude Code,
// Cursor, VS Code and the MCP Inspector, each for both ways in — OAuth (the client needs only
// the URL and discovers the rest) and the member key header. The key is always a placeholder:
// keys are shown once, at creation, and never again.

/** What the snippets stand for where the member's own key goes. */
export const KEY_PLACEHOLDER = 'pcm_YOUR_MEMBER_KEY';

export type ClientId = 'claude-desktop' | 'claude-code' | 'cursor' | 'vscode' | 'inspector';
export type AuthWay = 'oauth' | 'key';

/** One copyable block: where it goes (`file`, or a place in the client's settings) and its text. */
export interface Snippet { label: string; file?: string; language: 'json' | 'shell' | 'text'; text: string }

export interface ClientSetup {
  id: ClientId;
  name: string;
  /** Steps around the snippets, as short sentences. */
  steps: Record<AuthWay, string[]>;
  snippets: Record<AuthWay, Snippet[]>;
}

/**
 * The name the client shows for this server: `portcullis-` and the agent's name in lower-case
 * letters, digits and dashes (VS Code's key pattern `^[a-zA-Z][a-zA-Z0-9_-]*$`, and a word in
 * a shell command), at most 48 characters.
 */
export function serverNameOf(agentName: string): string {
  const slug = agentName.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 37).replace(/-+$/, '');
  return slug ? `portcullis-${slug}` : 'portcullis';
}

/** A word for a POSIX shell: bare when it has nothing the shell would read, else single-quoted. */
export function shellWord(text: string): string {
  return /^[A-Za-z0-9_@%+=:,./~-]+$/.test(text) ? text : `'${text.replaceAll("'", `'"'"'`)}'`;
}

const json = (value: unknown) => JSON.stringify(value, null, 2);

/** Every client's setup for the agent `agentName` at `mcpUrl` (the gateway's external `/mcp`). */
export function clientSetups(mcpUrl: string, agentName: string): ClientSetup[] {
  const name = serverNameOf(agentName);
  const bearer = `Bearer ${KEY_PLACEHOLDER}`;
  // mcp-remote refuses plain http unless told (a deployment without TLS, or a local one).
  const allowHttp = mcpUrl.startsWith('http:') ? ['--allow-http'] : [];
  return [
    {
      id: 'claude-code',
      name: 'Claude Code',
      steps: {
        oauth: ['Run this in a terminal, then type /mcp in Claude Code and choose Authenticate: your browser opens Portcullis to sign in and pick the agent.'],
        key: [`Run this in a terminal, with your member key in place of ${KEY_PLACEHOLDER}.`],
      },
      snippets: {
        oauth: [{ label: 'Terminal', language: 'shell', text: `claude mcp add --transport http ${shellWord(name)} ${shellWord(mcpUrl)}` }],
        key: [{ label: 'Terminal', language: 'shell', text: `claude mcp add --transport http ${shellWord(name)} ${shellWord(mcpUrl)} --header ${shellWord(`Authorization: ${bearer}`)}` }],
      },
    },
    {
      id: 'claude-desktop',
      name: 'Claude Desktop',
      steps: {
        oauth: ['Open Settings → Connectors → Add custom connector, paste this URL and choose Add, then Connect: Claude opens Portcullis to sign in and pick the agent.'],
        key: [
          'Claude Desktop sends no custom header to a remote server itself; the mcp-remote bridge (Node.js) adds it.',
          `Add this to claude_desktop_config.json (Settings → Developer → Edit Config), with your member key in place of ${KEY_PLACEHOLDER}, and restart Claude Desktop.`,
        ],
      },
      snippets: {
        oauth: [{ label: 'Connector URL', language: 'text', text: mcpUrl }],
        key: [{
          label: 'claude_desktop_config.json', file: 'claude_desktop_config.json', language: 'json',
          text: json({ mcpServers: { [name]: { command: 'npx', args: ['-y', 'mcp-remote', mcpUrl, ...allowHttp, '--header', 'Authorization:${PORTCULLIS_AUTH}'], env: { PORTCULLIS_AUTH: bearer } } } }),
        }],
      },
    },
    {
      id: 'cursor',
      name: 'Cursor',
      steps: {
        oauth: ['Save this as .cursor/mcp.json in your project (or ~/.cursor/mcp.json for every project); Cursor shows a Connect button that opens Portcullis to sign in.'],
        key: [`Save this as .cursor/mcp.json (or ~/.cursor/mcp.json), with your member key in place of ${KEY_PLACEHOLDER}. Keep the file out of version control.`],
      },
      snippets: {
        oauth: [{ label: '.cursor/mcp.json', file: '.cursor/mcp.json', language: 'json', text: json({ mcpServers: { [name]: { url: mcpUrl } } }) }],
        key: [{ label: '.cursor/mcp.json', file: '.cursor/mcp.json', language: 'json', text: json({ mcpServers: { [name]: { url: mcpUrl, headers: { Authorization: bearer } } } }) }],
      },
    },
    {
      id: 'vscode',
      name: 'VS Code',
      steps: {
        oauth: ['Save this as .vscode/mcp.json in your workspace and start the server: VS Code opens Portcullis to sign in and pick the agent.'],
        key: ['Save this as .vscode/mcp.json and start the server: VS Code asks for your member key once and keeps it in its secret storage, so the file holds no key.'],
      },
      snippets: {
        oauth: [{ label: '.vscode/mcp.json', file: '.vscode/mcp.json', language: 'json', text: json({ servers: { [name]: { type: 'http', url: mcpUrl } } }) }],
        key: [{
          label: '.vscode/mcp.json', file: '.vscode/mcp.json', language: 'json',
          text: json({
            inputs: [{ type: 'promptString', id: 'portcullis-key', description: 'Portcullis member key (pcm_…)', password: true }],
            servers: { [name]: { type: 'http', url: mcpUrl, headers: { Authorization: 'Bearer ${input:portcullis-key}' } } },
          }),
        }],
      },
    },
    {
      id: 'inspector',
      name: 'MCP Inspector',
      steps: {
        oauth: ['Start the Inspector, choose the Streamable HTTP transport, paste the URL and connect: it finds Portcullis\'s sign-in from the 401 and opens it.'],
        key: ['Start the Inspector, choose the Streamable HTTP transport, paste the URL, add the header below under Authentication, and connect.'],
      },
      snippets: {
        oauth: [
          { label: 'Terminal', language: 'shell', text: 'npx @modelcontextprotocol/inspector' },
          { label: 'URL', language: 'text', text: mcpUrl },
        ],
        key: [
          { label: 'Terminal', language: 'shell', text: 'npx @modelcontextprotocol/inspector' },
          { label: 'URL', language: 'text', text: mcpUrl },
          { label: 'Header', language: 'text', text: `Authorization: ${bearer}` },
        ],
      },
    },
  ];
}
