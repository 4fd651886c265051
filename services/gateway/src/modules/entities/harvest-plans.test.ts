import { describe, expect, it } from 'vitest';
import { connectors, getConnector } from '@portcullis/core';
import { dependenciesOf, harvestPlans, type ToolHarvestPlan } from './harvest-plans.ts';

const SAMPLE_PARENT = { id: 'parent-1', name: 'Parent', attributes: {} };

describe.each(connectors.map((c) => c.key))('harvest plan of %s', (service) => {
  const connector = getConnector(service)!;
  const plan = harvestPlans[service]!;
  const toolPlans = () => plan.plans.filter((p): p is ToolHarvestPlan => p.kind === 'tool');

  it('exists, and covers every entity type exactly once: planned or not harvestable', () => {
    expect(plan).toBeDefined();
    const planned = plan.plans.filter((p) => !p.helper).map((p) => p.type);
    const excluded = Object.keys(plan.notHarvestable);
    expect(new Set(planned).size).toBe(planned.length);
    expect([...planned, ...excluded].sort()).toEqual([...connector.entityTypes].sort());
    for (const reason of Object.values(plan.notHarvestable)) expect(reason.length).toBeGreaterThan(20);
  });

  it('keeps helpers apart from entity types and names each type once', () => {
    const types = plan.plans.map((p) => p.type);
    expect(new Set(types).size).toBe(types.length);
    for (const helper of plan.plans.filter((p) => p.helper)) expect(connector.entityTypes).not.toContain(helper.type);
  });

  it('uses only read-tier tools of the catalog, with every required argument and no unknown one', () => {
    for (const p of toolPlans()) {
      const tool = connector.tools.find((t) => t.name === p.tool);
      expect(tool, `${service}/${p.tool}`).toBeDefined();
      expect(tool!.tier, `${service}/${p.tool}`).toBe('read');
      const args = {
        ...p.args,
        ...p.perParent?.args(SAMPLE_PARENT),
        ...(p.page ? { [p.page.sizeArgument]: p.page.size } : {}),
        ...(p.page?.pageArgument ? { [p.page.pageArgument]: 1 } : {}),
      };
      for (const name of Object.keys(args)) expect(Object.keys(tool!.params), `${service}/${p.tool} takes ${name}`).toContain(name);
      for (const [name, spec] of Object.entries(tool!.params)) {
        if (spec.required) expect(args, `${service}/${p.tool} needs ${name}`).toHaveProperty(name);
      }
      for (const [name, value] of Object.entries(args)) {
        const declared = tool!.params[name]!.type;
        expect(Array.isArray(value) ? 'array' : typeof value, `${service}/${p.tool} ${name}`).toBe(declared);
      }
    }
  });

  it('depends only on types of its own plan, without cycles', () => {
    const byType = new Map(plan.plans.map((p) => [p.type, p]));
    const visiting = new Set<string>();
    const visit = (type: string) => {
      expect(visiting.has(type), `cycle through ${type}`).toBe(false);
      visiting.add(type);
      for (const dependency of dependenciesOf(byType.get(type)!)) {
        expect(byType.has(dependency), `${type} needs ${dependency}`).toBe(true);
        visit(dependency);
      }
      visiting.delete(type);
    };
    for (const p of plan.plans) visit(p.type);
  });

  it('derives only from attributes the source types keep', () => {
    const byType = new Map(plan.plans.map((p) => [p.type, p]));
    for (const p of plan.plans) {
      if (p.kind !== 'derived') continue;
      for (const source of p.from) {
        if (source.field === 'id') continue;
        const from = byType.get(source.type)!;
        expect(from.kind === 'tool' && (from.attributes?.includes(source.field) || from.parentAttribute === source.field), `${p.type} from ${source.type}.${source.field}`).toBe(true);
      }
    }
  });
});

describe('harvest plans', () => {
  it('exist only for catalog connectors', () => {
    expect(Object.keys(harvestPlans).sort()).toEqual(connectors.map((c) => c.key).sort());
  });

  it('leave exactly these types to webhooks', () => {
    const excluded = Object.entries(harvestPlans).flatMap(([service, p]) => Object.keys(p.notHarvestable).map((type) => `${service}/${type}`));
    expect(excluded.sort()).toEqual(['gdrive/folders', 'gdrive/shared_drives', 'notion/databases', 'notion/teamspaces', 'stripe/accounts']);
  });
});
