import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { service as healthService } from 'grpc-health-check';
import { addHealthService } from './health.ts';
import { bindServer } from './proto.ts';

const Health = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'grpc.health.v1.Health');

describe('gRPC health service', () => {
  it('answers NOT_SERVING until ready, SERVING while serving, NOT_SERVING once shutting down — for the server and the named service', async () => {
    const server = new grpc.Server();
    const health = addHealthService(server, 'portcullis.test.v1.Thing');
    const address = await bindServer(server, '127.0.0.1:0');
    const client = new Health(address, grpc.credentials.createInsecure()) as unknown as { check(req: { service: string }, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void; close(): void };
    const check = (name: string) => new Promise<string>((resolve, reject) => client.check({ service: name }, (err, res) => (err ? reject(err) : resolve(res.status))));
    try {
      expect(await check('')).toBe('NOT_SERVING');
      health.serving();
      expect(await check('')).toBe('SERVING');
      expect(await check('portcullis.test.v1.Thing')).toBe('SERVING');
      await expect(check('portcullis.other.v1.Nope')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      health.notServing();
      expect(await check('portcullis.test.v1.Thing')).toBe('NOT_SERVING');
    } finally {
      client.close();
      server.forceShutdown();
    }
  });
});
