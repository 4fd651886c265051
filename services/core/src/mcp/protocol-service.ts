/**
 * How an audit entry names a request that reaches no connector (decision 071, replacing the
 * pseudo-service of decision 025). The Cedar namespace `Portcullis` is the proxy's own
 * (`Portcullis::Member`, `Portcullis::Agent`); a connector's actions live in `<Label>MCP`.
 * - A tool call whose name names no connector (`nope__x`, `get_me`): `service` empty, `tool`
 *   the name as sent, action `Portcullis::Action::"tools/call"` (NO_CONNECTOR_CALL_ACTION). It
 *   is a call and counts as one.
 * - A protocol request (`initialize`, `tools/list`, `ping`, a notification, an HTTP `GET` or
 *   `DELETE` without a JSON-RPC body) refused before it was served: `service` empty, `tool` the
 *   method, action `Portcullis::Action::"<method>"`. It is audited, not a call.
 * A request can only be a protocol request by its JSON-RPC method: every `tools/call` is a
 * call, whatever name it sends, so nothing an agent sends passes a call off as one.
 */
export const GATEWAY_ACTION_TYPE = 'Portcullis::Action';

/** The action of a tool call whose name names no connector. */
export const NO_CONNECTOR_CALL_ACTION = `${GATEWAY_ACTION_TYPE}::"tools/call"`;

/** Whether an entry with this `action` records a protocol request rather than a tool call. */
export function isProtocolRequest(action: string): boolean {
  return action.startsWith(`${GATEWAY_ACTION_TYPE}::`) && action !== NO_CONNECTOR_CALL_ACTION;
}

