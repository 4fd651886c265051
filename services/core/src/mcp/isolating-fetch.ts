import { setMaxListeners } from 'node:events';

/**
 * A `fetch` for the MCP SDK's StreamableHTTPClientTransport that gives every request its own
 * AbortController, bridged from the transport-wide signal. Without it undici keeps one abort
 * listener per request on that shared signal until garbage collection, flooding
 * MaxListenersExceededWarning under load (stack-notes, MCP gotcha 2).
 */
export const isolatingFetch: typeof fetch = async (input, init) => {
  const parent = init?.signal;
  const controller = new AbortController();
  const bridge = () => controller.abort(parent?.reason);
  if (parent) {
    setMaxListeners(0, parent);
    if (parent.aborted) controller.abort(parent.reason);
    else parent.addEventListener('abort', bridge, { once: true });
  }
  try {
    return await fetch(input, { ...init, signal: controller.signal });
  } finally {
    parent?.removeEventListener('abort', bridge);
  }
};
