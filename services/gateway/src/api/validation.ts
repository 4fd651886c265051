import type { FastifyError } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { ApiError } from '@portcullis/core';

/**
 * Turns a route-schema validation failure into the REST error shape: 400 `invalid_request`
 * naming the first failing field, and where it was (body, querystring, params).
 */
export function validationApiError(error: FastifyError): ApiError | undefined {
  if (!hasZodFastifySchemaValidationErrors(error)) return undefined;
  const where = (error as { validationContext?: string }).validationContext ?? 'request';
  const first = error.validation[0]!;
  const issue = (first.params as { issue?: { code?: string; keys?: string[]; path?: PropertyKey[]; message?: string } }).issue;
  if (issue?.code === 'unrecognized_keys') {
    const keys = (issue.keys ?? []).join(', ');
    return new ApiError('invalid_request', `Unknown field(s) in ${where}: ${keys}`, { field: keys, in: where });
  }
  const field = (issue?.path ?? []).map(String).join('.') || first.instancePath.replace(/^\//, '').replaceAll('/', '.') || where;
  return new ApiError('invalid_request', `Invalid ${where} field "${field}": ${issue?.message ?? first.message}`, { field, in: where });
}
