import { describe, expect, it } from 'vitest';
import { connectors, getTool, inputSchemaOf, splitToolName, TIERS } from './catalog.ts';

describe('catalog', () => {
  it('holds the 16 connectors and 281 tools of the reference catalog, each tiered', () => {
    expect(connectors).toHaveLength(16);
    const tools = connectors.flatMap((c) => c.tools);
    expect(tools).toHaveLength(281);
    for (const t of tools) expect(TIERS).toContain(t.tier);
  });

  it('builds object input schemas with properties and required lists', () => {
    const tool = getTool('github', 'get_file_contents');
    expect(tool).toBeDefined();
    const schema = inputSchemaOf(tool!);
    expect(schema.type).toBe('object');
    expect(schema.properties.owner).toEqual({ type: 'string' });
    expect(schema.required).toEqual(expect.arrayContaining(['owner', 'repo']));
  });

  it('splits prefixed names only for known connectors', () => {
    expect(splitToolName('github__create_issue')).toEqual({ service: 'github', tool: 'create_issue' });
    expect(splitToolName('create_issue')).toBeUndefined();
    expect(splitToolName('nope__create_issue')).toBeUndefined();
    expect(splitToolName('github__')).toBeUndefined();
  });
});
