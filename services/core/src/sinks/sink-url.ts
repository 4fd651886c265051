import { isLoopbackHostname } from './loopback.ts';

/**
 * Why `text` cannot be a sink's address, or undefined when it can (decision 058): https only;
 * plain http only to a loopback host (`localhost`, 127.0.0.0/8, ::1) and only outside
 * production (`allowLoopbackHttp`), as the MCP origin rule treats loopback. No credentials in
 * the URL (they would be shown back in the list; secrets go in the sealed fields), no fragment.
 */
export function sinkUrlProblem(text: string, options: { allowLoopbackHttp: boolean }): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL such as https://siem.example.com/portcullis';
  }
  if (url.username || url.password) return 'must not hold a user name or password: put credentials in the secret or headers';
  if (url.hash) return 'must not hold a #fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && isLoopbackHostname(url.hostname)) {
    return options.allowLoopbackHttp ? undefined : 'must use https (plain http to loopback is for development and tests only)';
  }
  return 'must use https (plain http only to localhost outside production)';
}

/**
 * The OTLP/HTTP logs URL of an endpoint: as given when it ends in `/v1/logs` (a signal-specific
 * endpoint, like `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`), else with `/v1/logs` appended to its path
 * (a base endpoint, like `OTEL_EXPORTER_OTLP_ENDPOINT`).
 */
export function otlpLogsUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (!url.pathname.endsWith('/v1/logs')) url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/logs`;
  return url.toString();
}
