/**
 * Typed calls for an agent's audit sinks (owner only; decision 055). Secrets and header values
 * are sent, never read back: a sink answers with `headerNames` only.
 */
import { call, http, type Answer, type Body } from './client.ts';

export type SinkList = Answer<'/api/agents/{id}/sinks'>;
export type Sink = SinkList['sinks'][number];
export type SinkCreate = Body<'/api/agents/{id}/sinks', 'post'>;
export type SinkChange = Body<'/api/agents/{id}/sinks/{sinkId}', 'put'>;
export type SinkTestResult = Answer<'/api/agents/{id}/sinks/{sinkId}/test', 'post'>;

const agent = (id: string) => ({ params: { path: { id } } });
const sink = (id: string, sinkId: string) => ({ params: { path: { id, sinkId } } });

export const listSinks = (id: string) => call(http.GET('/api/agents/{id}/sinks', agent(id)));
export const createSink = (id: string, body: SinkCreate) => call(http.POST('/api/agents/{id}/sinks', { ...agent(id), body }));
export const updateSink = (id: string, sinkId: string, body: SinkChange) => call(http.PUT('/api/agents/{id}/sinks/{sinkId}', { ...sink(id, sinkId), body }));
export const deleteSink = (id: string, sinkId: string) => call(http.DELETE('/api/agents/{id}/sinks/{sinkId}', sink(id, sinkId)));
export const testSink = (id: string, sinkId: string) => call(http.POST('/api/agents/{id}/sinks/{sinkId}/test', { ...sink(id, sinkId), body: {} }));

/**
 * `Name: value` lines (one header a line, as curl's `-H`) as the API's header object; blank
 * lines are skipped. Undefined when the text holds none. A line without a colon is an error.
 */
export function parseHeaderLines(text: string): { headers?: Record<string, string>; error?: string } {
  const headers: Record<string, string> = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return { error: `"${line.slice(0, 40)}" is not a header: write Name: value` };
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return Object.keys(headers).length > 0 ? { headers } : {};
}
