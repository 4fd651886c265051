/**
 * The `service` of an audit entry that records an `/mcp` request other than a tool call —
 * `initialize`, `tools/list`, `ping`, a notification, an HTTP `GET` or `DELETE` — refused by
 * the gateway (the agent is disabled). Its `tool` is the JSON-RPC method, or `HTTP <method>`
 * for a request without a JSON-RPC body. No connector has this key, so such an entry is never
 * taken for a connector's tool, and call counters (dashboard and member stats) leave it out.
 */
export const MCP_PROTOCOL_SERVICE = 'mcp';
