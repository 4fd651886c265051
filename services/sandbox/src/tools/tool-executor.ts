import type { EntityStore, StoredEntity } from '../store/entity-store.ts';
import type { SandboxEntity } from '../store/seed-data.ts';
import { argumentProblems } from './argument-check.ts';
import { identifyingValue } from './identifiers.ts';
import { operationOfCall, type ToolOperation, type ToolPlan } from './tool-plan.ts';

/** The member whose token reached the sandbox, as the token names them. */
export interface CallerIdentity {
  login: string;
  name?: string;
}

/**
 * What every successful call answers (as JSON text). The first five fields are always there,
 * so a test can check which member's token arrived and that the arguments arrived unchanged.
 */
export interface ToolResultBody {
  connector: string;
  tool: string;
  operation: ToolOperation;
  identity: CallerIdentity;
  arguments: Record<string, unknown>;
  /** The record read, created, updated, removed or recorded. */
  item?: SandboxEntity;
  /** The records a list or search matched. */
  items?: SandboxEntity[];
  /** For a read of one record: records of other collections that point at it (messages of a channel). */
  related?: Record<string, SandboxEntity[]>;
  /** Set when `item` was removed. */
  deleted?: true;
  /** For tools the sandbox keeps no data for. */
  result?: { message: string };
}

/** A tool call's outcome: a body, or the text of an `isError` result. */
export type ToolOutcome = { isError: false; body: ToolResultBody } | { isError: true; message: string };

/** Where calls that change nothing the sandbox models are kept. */
export const ACTIVITY_COLLECTION = 'activity';

/** Arguments searched as free text in lists; qualifiers such as `org:acme` are ignored. */
const FREE_TEXT_ARGUMENTS = new Set(['query', 'searchQuery', 'searchString', 'q', 'name_contains', 'fullText']);
/** Fields matched by substring rather than equality. */
const SUBSTRING_FIELDS = new Set(['name', 'title']);
const LIMIT_ARGUMENTS = ['limit', 'perPage', 'per_page', 'pageSize', 'page_size', 'maxResults', 'results_limit'];

type Scalar = string | number | boolean;
type Arguments = Readonly<Record<string, unknown>>;

function isScalar(value: unknown): value is Scalar {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}

function agrees(field: unknown, value: Scalar, name: string): boolean {
  if (typeof field === 'string' && typeof value === 'string') {
    const have = field.toLowerCase();
    const want = value.toLowerCase();
    return SUBSTRING_FIELDS.has(name) ? have.includes(want) : have === want;
  }
  return field === value;
}

/** Whether every scalar argument that names a field of the entity agrees with it. */
function fieldsAgree(entity: SandboxEntity, args: Arguments, skip: ReadonlySet<string>): boolean {
  for (const [name, value] of Object.entries(args)) {
    if (skip.has(name) || !isScalar(value) || !Object.hasOwn(entity, name)) continue;
    if (!agrees(entity[name], value, name)) return false;
  }
  return true;
}

function agreeingFieldCount(entity: SandboxEntity, args: Arguments): number {
  let count = 0;
  for (const [name, value] of Object.entries(args)) {
    if (isScalar(value) && Object.hasOwn(entity, name) && agrees(entity[name], value, name)) count += 1;
  }
  return count;
}

function freeTextTermsOf(args: Arguments): string[] {
  const terms: string[] = [];
  for (const [name, value] of Object.entries(args)) {
    if (!FREE_TEXT_ARGUMENTS.has(name) || typeof value !== 'string') continue;
    for (const term of value.toLowerCase().split(/\s+/)) if (term.length > 0 && !term.includes(':')) terms.push(term);
  }
  return terms;
}

function limitOf(args: Arguments): number | undefined {
  for (const name of LIMIT_ARGUMENTS) {
    const value = args[name];
    if (typeof value === 'number' && Number.isInteger(value) && value > 0) return value;
  }
  return undefined;
}

function listMatching(store: EntityStore, collection: string, args: Arguments): SandboxEntity[] {
  const terms = freeTextTermsOf(args);
  const limit = limitOf(args);
  const items: SandboxEntity[] = [];
  for (const { entity } of store.records(collection)) {
    if (!fieldsAgree(entity, args, FREE_TEXT_ARGUMENTS)) continue;
    if (terms.length > 0) {
      const text = JSON.stringify(entity).toLowerCase();
      if (!terms.every((term) => text.includes(term))) continue;
    }
    items.push(entity);
    if (items.length === limit) break;
  }
  return items;
}

type Target = { kind: 'unnamed' } | { kind: 'missing'; message: string } | { kind: 'found'; record: StoredEntity };

interface TargetRules {
  /** Reads let `query` name the record (`get_team {query: "ENG"}`). */
  queryIdentifies: boolean;
  /** Reads require the other arguments that are fields to agree; writes carry new values in them. */
  strictScope: boolean;
  /** Restricts identification to these argument names (`save_*` updates only by `id`). */
  only?: readonly string[];
}

/**
 * The one record a call names: the arguments that identify a member (`id`, `issue_number`,
 * `repo`…) must hit one of its aliases; when several records qualify, the one with more
 * agreeing fields wins, then the older one.
 */
function findTarget(store: EntityStore, collection: string, args: Arguments, rules: TargetRules): Target {
  const naming = store.namingOf(collection);
  const identifiers: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(args)) {
    if (rules.only ? !rules.only.includes(name) : !(naming.isIdentifier(name) || (rules.queryIdentifies && name === 'query'))) continue;
    const alias = identifyingValue(value);
    if (alias !== undefined) identifiers.push([name, alias]);
  }
  if (identifiers.length === 0) return { kind: 'unnamed' };
  const identifierNames = new Set(identifiers.map(([name]) => name));
  let best: StoredEntity | undefined;
  let bestScore = 0;
  for (const record of store.records(collection)) {
    const hits = identifiers.filter(([, alias]) => record.aliases.has(alias)).length;
    if (hits === 0) continue;
    if (rules.strictScope && !fieldsAgree(record.entity, args, identifierNames)) continue;
    const score = hits * 1000 + agreeingFieldCount(record.entity, args);
    if (score > bestScore) {
      best = record;
      bestScore = score;
    }
  }
  if (best) return { kind: 'found', record: best };
  const named = identifiers.map(([name]) => `${name}=${JSON.stringify(args[name])}`).join(', ');
  return { kind: 'missing', message: `No ${store.memberNameFor(collection).replace(/_/g, ' ')} found with ${named}` };
}

/** Records of other collections whose fields point at `target` (`channel_id` on a message). */
function relatedTo(store: EntityStore, collection: string, target: StoredEntity): Record<string, SandboxEntity[]> | undefined {
  const naming = store.namingOf(collection);
  let related: Record<string, SandboxEntity[]> | undefined;
  for (const other of store.collectionNames()) {
    if (other === collection || other === ACTIVITY_COLLECTION) continue;
    for (const { entity } of store.records(other)) {
      const points = Object.entries(entity).some(([field, value]) => {
        if (!naming.isReference(field)) return false;
        const alias = identifyingValue(value);
        return alias !== undefined && target.aliases.has(alias);
      });
      if (points) ((related ??= {})[other] ??= []).push(entity);
    }
  }
  return related;
}

function storedFieldsOf(plan: ToolPlan, args: Arguments): Record<string, unknown> {
  if (plan.operationArgument === undefined) return { ...args };
  const { [plan.operationArgument]: _operation, ...fields } = args;
  return fields;
}

/**
 * Runs one tool call against a connector's store, as the plan says (see `ToolOperation`).
 * Missing or mistyped arguments and records that do not exist give an error text, like a
 * real server's `isError` result; nothing is changed then.
 */
export function executeTool(plan: ToolPlan, store: EntityStore, call: { connector: string; args: Arguments; identity: CallerIdentity }): ToolOutcome {
  const { args, identity } = call;
  const problems = argumentProblems(plan.tool, args);
  if (problems.length > 0) return { isError: true, message: `Invalid arguments for tool ${plan.tool.name}: ${problems.join('; ')}` };

  const operation = operationOfCall(plan, args);
  const base = { connector: call.connector, tool: plan.tool.name, identity, arguments: { ...args } };
  const answer = (op: ToolOperation, payload: Partial<ToolResultBody>): ToolOutcome => ({ isError: false, body: { ...base, operation: op, ...payload } });
  const record = (): ToolOutcome =>
    answer('record', { item: store.insert(ACTIVITY_COLLECTION, { name: plan.tool.name, tool: plan.tool.name, arguments: { ...args }, performedBy: identity.login }) });
  const collection = plan.collection;

  switch (operation) {
    case 'identity':
      return answer(operation, { item: { id: identity.login, ...identity, name: identity.name ?? identity.login } });
    case 'echo':
      return answer(operation, { result: { message: `The sandbox keeps no data for ${plan.tool.name}; the call was accepted and its arguments are echoed.` } });
    case 'list':
      return answer(operation, { items: listMatching(store, collection, args) });
    case 'get': {
      const target = findTarget(store, collection, args, { queryIdentifies: true, strictScope: true });
      if (target.kind === 'unnamed') return answer('list', { items: listMatching(store, collection, args) });
      if (target.kind === 'missing') return { isError: true, message: target.message };
      const related = relatedTo(store, collection, target.record);
      return answer(operation, { item: target.record.entity, ...(related ? { related } : {}) });
    }
    case 'create':
      return answer(operation, { item: store.insert(collection, { ...storedFieldsOf(plan, args), createdBy: identity.login }) });
    case 'upsert': {
      if (args.id === undefined) return answer('create', { item: store.insert(collection, { ...storedFieldsOf(plan, args), createdBy: identity.login }) });
      const target = findTarget(store, collection, args, { queryIdentifies: false, strictScope: false, only: ['id'] });
      if (target.kind !== 'found') return { isError: true, message: target.kind === 'missing' ? target.message : `Invalid id for ${plan.tool.name}` };
      return answer('update', { item: updated(store, collection, target.record, plan, args, identity) });
    }
    case 'update': {
      const target = findTarget(store, collection, args, { queryIdentifies: false, strictScope: false });
      if (target.kind === 'unnamed') return record();
      if (target.kind === 'missing') return { isError: true, message: target.message };
      return answer(operation, { item: updated(store, collection, target.record, plan, args, identity) });
    }
    case 'remove': {
      const target = findTarget(store, collection, args, { queryIdentifies: false, strictScope: false });
      if (target.kind === 'unnamed') return record();
      if (target.kind === 'missing') return { isError: true, message: target.message };
      store.remove(collection, target.record.entity.id);
      return answer(operation, { item: target.record.entity, deleted: true });
    }
    case 'record':
      return record();
  }
}

function updated(store: EntityStore, collection: string, target: StoredEntity, plan: ToolPlan, args: Arguments, identity: CallerIdentity): SandboxEntity {
  const { id: _id, ...changes } = storedFieldsOf(plan, args);
  const status = plan.status ? { status: plan.status } : {};
  // The target was found a moment ago and nothing runs in between, so the fallback never applies.
  return store.update(collection, target.entity.id, { ...changes, ...status, updatedBy: identity.login }) ?? target.entity;
}
