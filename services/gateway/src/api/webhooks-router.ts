import type { FastifyInstance } from 'fastify';
import type { Database } from '@portcullis/core';

/** Inbound provider webhooks (being built). Registered as an encapsulated plugin: it parses its own raw bodies. */
export async function webhooksRoutes(_fastify: FastifyInstance, _options: { db: Database; secret: string; now?: () => number }) {}
