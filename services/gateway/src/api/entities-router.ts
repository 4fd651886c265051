import type { FastifyInstance } from 'fastify';
import type { Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';

/** Harvested entities for policy pickers (being built). */
export async function entitiesRoutes(_fastify: FastifyInstance, _options: { db: Database; auth: AuthService }) {}
