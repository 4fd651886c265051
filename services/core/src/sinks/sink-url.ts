/**
 * Why `text` cannot be a sink's address on its face, or undefined (decision 058): an absolute
 * http(s) URL without credentials (they would be shown back in the list; secrets go in the
 * sealed fields) or a fragment. Where it may point — https, public addresses, the development
 * and SINK_ALLOWED_HOSTS exceptions — is the outbound destination rule's (`checkDestination`).
 */
export function sinkUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL such as https://siem.example.com/portcullis';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must use https';
  if (url.username || url.password) return 'must not hold a user name or password: put credentials in the secret or headers';
  if (url.hash) return 'must not hold a #fragment';
  return undefined;
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
