import type { CatalogTool, ParamSpec } from '@portcullis/core';

function hasType(value: unknown, type: ParamSpec['type']): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
  }
}

/**
 * Checks call arguments against the tool's catalog parameters the way a real server's schema
 * validation would: required ones present, known ones of the declared type. Unknown
 * arguments pass, as the catalog schemas do not forbid them. Returns one line per problem.
 */
export function argumentProblems(tool: CatalogTool, args: Readonly<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  for (const [name, spec] of Object.entries(tool.params)) {
    const value = args[name];
    if (value === undefined) {
      if (spec.required) problems.push(`missing required argument "${name}"`);
    } else if (!hasType(value, spec.type)) {
      problems.push(`argument "${name}" must be ${spec.type === 'array' || spec.type === 'object' ? 'an' : 'a'} ${spec.type}`);
    }
  }
  return problems;
}
