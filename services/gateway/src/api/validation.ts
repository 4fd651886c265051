import type { FastifyError } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { ApiError } from '@portcullis/core';

type ZodIssueParams = { issue?: { code?: string; keys?: string[]; path?: PropertyKey[]; message?: string }; keys?: string[] };
type ValidationItem = { keyword?: string; instancePath: string; message?: string; params: unknown };

/**
 * The unknown keys an item reports, if that is what it reports. The zod provider carries them
 * two ways: the zod issue in `params.issue` (query strings), or `keyword` + `params.keys` (bodies).
 */
function unknownKeysOf(item: ValidationItem): string[] | undefined {
  const params = item.params as ZodIssueParams;
  // Named with the path of the object holding them: `priority`, `conditions.moonPhase`.
  const under = (path: string) => (key: string) => (path ? `${path}.${key}` : key);
  if (params.issue?.code === 'unrecognized_keys') return (params.issue.keys ?? []).map(under((params.issue.path ?? []).map(String).join('.')));
  if (item.keyword === 'unrecognized_keys') return (params.keys ?? []).map(under(item.instancePath.replace(/^\//, '').replaceAll('/', '.')));
  return undefined;
}

/** What one validation item says: the field(s) it names and what is wrong with it. */
function problemsOf(item: ValidationItem, where: string): Array<{ field: string; issue: string }> {
  const unknown = unknownKeysOf(item);
  if (unknown) return unknown.map((key) => ({ field: key, issue: 'is not a known field' }));
  const issue = (item.params as ZodIssueParams).issue;
  const field = (issue?.path ?? []).map(String).join('.') || item.instancePath.replace(/^\//, '').replaceAll('/', '.') || where;
  return [{ field, issue: issue?.message ?? item.message ?? 'is not valid' }];
}

/**
 * Turns a route-schema validation failure into the REST error shape: 400 `invalid_request`
 * naming the first failing field, and where it was (body, querystring, params), in the
 * message and in `details` — `field`, `in`, `issue` (what is wrong with it) and `issues`:
 * every failing field once, `[{field, issue}]`, so a form can mark all of them (decision 039).
 */
export function validationApiError(error: FastifyError): ApiError | undefined {
  if (!hasZodFastifySchemaValidationErrors(error)) return undefined;
  const where = (error as { validationContext?: string }).validationContext ?? 'request';
  const seen = new Set<string>();
  const issues = error.validation.flatMap((item) => problemsOf(item, where)).filter((p) => !seen.has(p.field) && seen.add(p.field));
  const first = error.validation[0]!;
  const unknown = unknownKeysOf(first);
  if (unknown) {
    const keys = unknown.join(', ');
    return new ApiError('invalid_request', `Unknown field(s) in ${where}: ${keys}`, { field: keys, in: where, issue: 'is not a known field', issues });
  }
  const [{ field, issue }] = problemsOf(first, where) as [{ field: string; issue: string }];
  return new ApiError('invalid_request', `Invalid ${where} field "${field}": ${issue}`, { field, in: where, issue, issues });
}
