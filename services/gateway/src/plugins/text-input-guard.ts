import type { FastifyRequest } from 'fastify';
import { ApiError } from '@portcullis/core';

/**
 * Control characters a person never types into a name, a filter or a policy: C0 controls but
 * tab, line feed and carriage return, and DEL. NUL in particular cannot be stored in a Postgres
 * `text` column, so letting it through turned a typo into a 500.
 */
const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;

/** Where a request carries text, in the order they are checked. */
const PARTS = ['params', 'query', 'body'] as const;
const PART_NAMES = { params: 'path', query: 'querystring', body: 'body' } as const;

/**
 * A `preValidation` hook for `/api`: refuses, once for every route, any path parameter, query
 * parameter, body string or body key that contains a control character, with 400
 * `invalid_request` naming the field. Nothing downstream (validation, services, the database)
 * ever sees such a value. The walk is iterative, so a deeply nested body cannot exhaust the stack.
 */
export async function refuseControlCharacters(request: FastifyRequest): Promise<void> {
  for (const part of PARTS) {
    const field = fieldWithControlCharacter(request[part]);
    if (field !== undefined) {
      const where = PART_NAMES[part];
      throw new ApiError('invalid_request', `Invalid ${where} field "${field || where}": control characters are not allowed.`, { field: field || where, in: where });
    }
  }
}

/** The dotted path of the first string (or key) holding a control character, `''` for the root, or undefined. */
export function fieldWithControlCharacter(root: unknown): string | undefined {
  const stack: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === 'string') {
      if (CONTROL_CHARACTER.test(value)) return path;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], path: join(path, String(i)) });
    } else if (value !== null && typeof value === 'object' && !Buffer.isBuffer(value)) {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        if (CONTROL_CHARACTER.test(key)) return join(path, JSON.stringify(key).slice(1, -1));
        stack.push({ value: child, path: join(path, key) });
      }
    }
  }
  return undefined;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}
