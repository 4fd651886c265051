import { createServer, type Server } from 'node:http';
import { SINK_SIGNATURE_HEADER, verifySinkSignature, type SinkEntry, type WebhookSinkBody } from '@portcullis/core';

/**
 * A webhook sink's receiver as a customer would run it (decision 056): verifies each request's
 * HMAC before reading it (401 otherwise), then records what arrived — each entry's deliveries
 * and body, test requests, and whether two requests were ever in flight at once. `kill` drops
 * it at once like a crash (open connections cut); `start` brings it back on the same port.
 */
export function sinkReceiver(port: number, secret: string) {
  const deliveries = new Map<string, number>();
  const entries = new Map<string, SinkEntry>();
  let tests = 0;
  let inFlight = 0;
  let overlapped = false;
  let refusedSignatures = 0;
  let server: Server | undefined;
  return {
    url: `http://127.0.0.1:${port}/portcullis`,
    deliveries,
    entries,
    get tests() { return tests; },
    get overlapped() { return overlapped; },
    get refusedSignatures() { return refusedSignatures; },
    async start() {
      server = createServer((req, res) => {
        inFlight += 1;
        if (inFlight > 1) overlapped = true;
        let body = '';
        req.on('data', (c) => { body += c; });
        req.on('end', () => {
          inFlight -= 1;
          if (!verifySinkSignature(secret, req.headers[SINK_SIGNATURE_HEADER] as string | undefined, body)) {
            refusedSignatures += 1;
            res.writeHead(401).end();
            return;
          }
          const payload = JSON.parse(body) as WebhookSinkBody;
          if (payload.test) tests += 1;
          else for (const e of payload.entries) {
            deliveries.set(e.id, (deliveries.get(e.id) ?? 0) + 1);
            entries.set(e.id, e);
          }
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    },
    async kill() {
      server!.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
    },
  };
}
