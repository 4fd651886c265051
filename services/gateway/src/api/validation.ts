import type { z } from 'zod';
import { ApiError } from '@portcullis/core';

/** Parses request input with `schema`; a failure is a 400 naming the first failing field. */
export function parseInput<T extends z.ZodType>(schema: T, value: unknown, where: 'body' | 'query' | 'params'): z.infer<T> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.join('.') || (issue.code === 'unrecognized_keys' ? (issue as { keys?: string[] }).keys?.join(',') ?? where : where);
  const fieldName = issue.code === 'unrecognized_keys' ? ((issue as { keys?: string[] }).keys ?? []).join(', ') : field;
  const message = issue.code === 'unrecognized_keys' ? `Unknown field(s) in ${where}: ${fieldName}` : `Invalid ${where} field "${field}": ${issue.message}`;
  throw new ApiError('invalid_request', message, { field: fieldName, in: where });
}
