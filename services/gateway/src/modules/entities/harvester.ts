import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { EntityRecord, EntityStore } from './entity-store.ts';
import { dependenciesOf, harvestPlans, type ConnectorHarvestPlan, type DerivedHarvestPlan, type HarvestPlan, type ResultRecord, type ToolHarvestPlan } from './harvest-plans.ts';

/** Calls one tool of the connector with the member's token (an MCP client's `callTool`). */
export type ToolCaller = (tool: string, args: Record<string, unknown>) => Promise<CallToolResult>;

export interface HarvestOptions {
  /** Records kept per type at most; more mark the type partial. Default 1000. */
  maxRecordsPerType?: number;
  /** Parents a fanned-out type is read for at most (accounts, bases, projects…). Default 25. */
  maxParents?: number;
  /** Tool calls in flight at once. Default 4. */
  concurrency?: number;
  /** Deadline of one tool call; a late one fails its type. Default 20 s. */
  callTimeoutMs?: number;
  /** Another plan than the connector's own (tests). */
  plan?: ConnectorHarvestPlan;
}

/** What one harvest of a connector found. */
export interface HarvestResult {
  /** Records per catalog entity type that was read, also those in `partial`. */
  types: Record<string, EntityRecord[]>;
  /** Types that could not be read, and why (a message safe to log and show). */
  failed: Record<string, string>;
  /**
   * Types in `types` known to be incomplete (a cap was reached, a list has more pages than
   * were read, some fanned-out calls failed), and why. They are stored without deleting.
   */
  partial: Record<string, string>;
}

/** Who harvested and for which agent: a new connection (`NewConnection`) fits as it is. */
export interface HarvestTarget { agentId: string; memberId: string; service: string }

const DEFAULTS = { maxRecordsPerType: 1000, maxParents: 25, concurrency: 4, callTimeoutMs: 20_000 };
/** Messages are cut to this length: they come from the connector and end up in logs. */
const MESSAGE_LIMIT = 300;
const ATTRIBUTE_TEXT_LIMIT = 500;
const ID_LIMIT = 500;

/** A failure of one type's harvest; its message is shown as the type's `failed` reason. */
class HarvestTypeError extends Error {
  override readonly name = 'HarvestTypeError';
}

type Outcome = { ok: true; records: EntityRecord[]; partial?: string } | { ok: false; error: string };

const clip = (text: string, limit = MESSAGE_LIMIT) => (text.length > limit ? `${text.slice(0, limit - 1)}…` : text);

function messageOf(err: unknown): string {
  return clip(err instanceof Error ? err.message : String(err));
}

/** At most `max` calls of the returned function run at once; the others wait in order. */
function boundedConcurrency(max: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    while (active >= max) await new Promise<void>((resolve) => waiting.push(resolve));
    active += 1;
    try {
      return await task();
    } finally {
      active -= 1;
      waiting.shift()?.();
    }
  };
}

function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HarvestTypeError(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** The JSON a result carries: `structuredContent`, else the first text content that parses. */
function payloadOf(result: CallToolResult): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  for (const part of result.content ?? []) {
    if (part.type !== 'text') continue;
    try {
      return JSON.parse(part.text) as unknown;
    } catch {
      // Not JSON: try the next part.
    }
  }
  return undefined;
}

function errorTextOf(result: CallToolResult): string {
  const text = (result.content ?? []).flatMap((part) => (part.type === 'text' ? [part.text] : [])).join(' ').trim();
  return text || 'no message';
}

const isObject = (value: unknown): value is ResultRecord => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The record objects at the plan's `recordsAt` (dot-separated): a list, or one object for `single` plans. */
function recordsOf(result: CallToolResult, plan: ToolHarvestPlan): ResultRecord[] {
  const payload = payloadOf(result);
  let value: unknown = payload;
  for (const key of plan.recordsAt.split('.')) value = isObject(value) ? value[key] : undefined;
  // A server that answers with the bare list has no field to name.
  if (value === undefined && Array.isArray(payload)) value = payload;
  if (Array.isArray(value)) return value.filter(isObject);
  if (plan.single && isObject(value)) return [value];
  throw new HarvestTypeError(`${plan.tool} answered no ${plan.single ? 'record' : 'list'} at "${plan.recordsAt}"`);
}

function scalarOrUndefined(value: unknown): string | number | boolean | undefined {
  if (typeof value === 'string') return clip(value, ATTRIBUTE_TEXT_LIMIT);
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'boolean') return value;
  return undefined;
}

function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() || undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/** An entity record from a result record; undefined when it carries no usable id. */
function entityOf(record: ResultRecord, plan: ToolHarvestPlan, parent: EntityRecord | undefined): EntityRecord | undefined {
  const id = textOf(plan.id(record, parent));
  if (id === undefined || id.length > ID_LIMIT) return undefined;
  const attributes: Record<string, unknown> = {};
  for (const field of plan.attributes ?? []) {
    const value = scalarOrUndefined(record[field]);
    if (value !== undefined) attributes[field] = value;
  }
  if (plan.parentAttribute && parent) attributes[plan.parentAttribute] = parent.id;
  return { id, name: clip(textOf(plan.name(record, parent)) ?? id, ATTRIBUTE_TEXT_LIMIT), attributes };
}

/** Collects records by id (the first report wins) up to a cap. */
class RecordSet {
  readonly #byId = new Map<string, EntityRecord>();
  overflowed = false;
  constructor(private readonly cap: number) {}

  add(records: Iterable<EntityRecord>): void {
    for (const record of records) {
      if (this.#byId.has(record.id)) continue;
      if (this.#byId.size >= this.cap) { this.overflowed = true; break; }
      this.#byId.set(record.id, record);
    }
  }

  get full(): boolean { return this.#byId.size >= this.cap; }
  get records(): EntityRecord[] { return [...this.#byId.values()]; }
}

/**
 * Harvests the entities of one connector through its read tools, as `harvestPlans` says:
 * types that fan out over (or derive from) other types run after them; at most
 * `concurrency` calls are in flight; each type keeps at most `maxRecordsPerType` records and
 * fans out over at most `maxParents` parents. One type's failure never throws: it lands in
 * `failed` (with the types that depend on it), and the others go on. Types the plan marks
 * not harvestable are absent from the result. An unknown connector harvests nothing.
 */
export async function harvestEntities(call: ToolCaller, service: string, options: HarvestOptions = {}): Promise<HarvestResult> {
  const settings = { ...DEFAULTS, ...options };
  const plan = options.plan ?? harvestPlans[service];
  const result: HarvestResult = { types: {}, failed: {}, partial: {} };
  if (!plan) return result;

  const plansByType = new Map(plan.plans.map((p) => [p.type, p]));
  const slot = boundedConcurrency(Math.max(1, settings.concurrency));
  const runs = new Map<string, Promise<Outcome>>();

  async function callTool(tool: string, args: Record<string, unknown>): Promise<CallToolResult> {
    return slot(async () => {
      const answer = await withDeadline(Promise.resolve().then(() => call(tool, args)), settings.callTimeoutMs, tool);
      if (answer.isError) throw new HarvestTypeError(`${tool} answered an error: ${clip(errorTextOf(answer), 200)}`);
      return answer;
    });
  }

  /** Reads one parent's records (or the only call's): every page, until the set is full. */
  async function readPages(toolPlan: ToolHarvestPlan, set: RecordSet, parent: EntityRecord | undefined): Promise<string | undefined> {
    const base = { ...toolPlan.args, ...(parent && toolPlan.perParent ? toolPlan.perParent.args(parent) : {}) };
    const page = toolPlan.page;
    const seen = new Set<string>();
    for (let number = 1; ; number += 1) {
      const args = { ...base, ...(page ? { [page.sizeArgument]: page.size } : {}), ...(page?.pageArgument ? { [page.pageArgument]: number } : {}) };
      const found = recordsOf(await callTool(toolPlan.tool, args), toolPlan);
      const kept = toolPlan.keep ? found.filter((r) => toolPlan.keep!(r, parent)) : found;
      const records = kept.flatMap((r) => entityOf(r, toolPlan, parent) ?? []);
      // An answer of another shape than planned must not pass for "nothing there" (and empty the store).
      if (kept.length > 0 && records.length === 0) throw new HarvestTypeError(`${toolPlan.tool} answered ${kept.length} record(s), none with an id`);
      set.add(records);
      const repeated = records.every((r) => seen.has(r.id));
      for (const r of records) seen.add(r.id);
      const fullPage = page !== undefined && found.length >= page.size;
      if (!fullPage) return undefined;
      // A full page at the cap: there is more than the cap lets in.
      if (set.full) { set.overflowed = true; return undefined; }
      if (!page.pageArgument) return `${toolPlan.tool} returned a full page of ${page.size}; later pages are not read`;
      // A server that ignores the page number repeats its first page: stop rather than loop.
      if (repeated) return undefined;
    }
  }

  async function runTool(toolPlan: ToolHarvestPlan, done: ReadonlyMap<string, Outcome>): Promise<Outcome> {
    const set = new RecordSet(settings.maxRecordsPerType);
    const notes: string[] = [];
    if (!toolPlan.perParent) {
      const note = await readPages(toolPlan, set, undefined);
      if (note) notes.push(note);
    } else {
      const parents = done.get(toolPlan.perParent.type)!;
      if (!parents.ok) return { ok: false, error: `needs ${toolPlan.perParent.type}, which failed: ${parents.error}` };
      const chosen = parents.records.slice(0, settings.maxParents);
      if (parents.records.length > chosen.length) notes.push(`read for the first ${chosen.length} of ${parents.records.length} ${toolPlan.perParent.type}`);
      const settled = await Promise.allSettled(chosen.map((parent) => readPages(toolPlan, set, parent)));
      const failures = settled.flatMap((s) => (s.status === 'rejected' ? [messageOf(s.reason)] : []));
      if (chosen.length > 0 && failures.length === chosen.length) return { ok: false, error: failures[0]! };
      if (failures.length > 0) notes.push(`${failures.length} of ${chosen.length} calls failed: ${failures[0]}`);
      notes.push(...settled.flatMap((s) => (s.status === 'fulfilled' && s.value ? [s.value] : [])));
    }
    if (set.overflowed) notes.push(`capped at ${settings.maxRecordsPerType} records`);
    return { ok: true, records: set.records, ...(notes.length > 0 ? { partial: clip([...new Set(notes)].join('; ')) } : {}) };
  }

  async function runDerived(derived: DerivedHarvestPlan, done: ReadonlyMap<string, Outcome>): Promise<Outcome> {
    const set = new RecordSet(settings.maxRecordsPerType);
    const notes: string[] = [];
    const failures: string[] = [];
    for (const source of derived.from) {
      const outcome = done.get(source.type)!;
      if (!outcome.ok) { failures.push(`${source.type} failed: ${outcome.error}`); continue; }
      if (outcome.partial) notes.push(`${source.type} is partial`);
      set.add(outcome.records.flatMap((record) => {
        const id = textOf(source.field === 'id' ? record.id : record.attributes?.[source.field]);
        return id === undefined ? [] : [{ id, name: id, attributes: {} }];
      }));
    }
    if (failures.length === derived.from.length) return { ok: false, error: clip(failures.join('; ')) };
    notes.push(...failures);
    if (set.overflowed) notes.push(`capped at ${settings.maxRecordsPerType} records`);
    return { ok: true, records: set.records, ...(notes.length > 0 ? { partial: clip(notes.join('; ')) } : {}) };
  }

  function outcomeOf(type: string, path: readonly string[] = []): Promise<Outcome> {
    let run = runs.get(type);
    if (run) return run;
    const typePlan: HarvestPlan | undefined = plansByType.get(type);
    if (!typePlan) return Promise.resolve({ ok: false, error: `no plan harvests "${type}"` });
    if (path.includes(type)) return Promise.resolve({ ok: false, error: `plans depend on each other in a cycle: ${[...path, type].join(' → ')}` });
    // Dependencies are started (synchronously) before this type is registered, so a cycle
    // meets an unregistered type on its path and fails instead of waiting on itself.
    const dependencies = dependenciesOf(typePlan);
    const before = dependencies.map((dependency) => outcomeOf(dependency, [...path, type]));
    run = Promise.all(before)
      .then((outcomes) => {
        const done = new Map(dependencies.map((dependency, i) => [dependency, outcomes[i]!]));
        return typePlan.kind === 'tool' ? runTool(typePlan, done) : runDerived(typePlan, done);
      })
      .catch((err: unknown): Outcome => ({ ok: false, error: messageOf(err) }));
    runs.set(type, run);
    return run;
  }

  const reported = plan.plans.filter((p) => !p.helper);
  const outcomes = await Promise.all(reported.map((p) => outcomeOf(p.type)));
  reported.forEach((p, i) => {
    const outcome = outcomes[i]!;
    if (!outcome.ok) { result.failed[p.type] = outcome.error; return; }
    result.types[p.type] = outcome.records;
    if (outcome.partial) result.partial[p.type] = outcome.partial;
  });
  return result;
}

/**
 * Stores a harvest for an agent: each complete type replaces the stored ones (entities the
 * connector no longer reports go), each partial type is upserted (nothing is deleted on
 * incomplete evidence), failed types keep their old rows. `memberId` becomes `harvestedBy`.
 */
export async function storeHarvest(store: Pick<EntityStore, 'replace' | 'upsert'>, target: HarvestTarget, result: HarvestResult): Promise<void> {
  for (const [type, records] of Object.entries(result.types)) {
    const address = { agentId: target.agentId, service: target.service, type };
    if (type in result.partial) await store.upsert(address, records, target.memberId);
    else await store.replace(address, records, target.memberId);
  }
}

/**
 * Harvests a connector with a member's fresh connection and stores what it found, in one
 * call. Throws only when the store does (a harvest failure is in the returned result):
 *
 * ```ts
 * afterConnect: async (c) => { await harvestAndStore(entityStore, c, (tool, args) => upstream.callTool({ ...c, url: upstreamUrls[c.service] }, tool, args)); },
 * ```
 */
export async function harvestAndStore(store: Pick<EntityStore, 'replace' | 'upsert'>, target: HarvestTarget, call: ToolCaller, options?: HarvestOptions): Promise<HarvestResult> {
  const result = await harvestEntities(call, target.service, options);
  await storeHarvest(store, target, result);
  return result;
}
