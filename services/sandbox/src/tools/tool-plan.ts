import type { CatalogTool, Connector } from '@portcullis/core';
import { collectionNameOf, isPlural, memberNameOf, singularOf, wordsOf } from './words.ts';

/**
 * How the sandbox answers each catalog tool, decided once from the tool's name and tier
 * rather than written by hand for 281 tools:
 *
 * - read tier: `identity` (who am I), `list` and `get` over a collection, else `echo`;
 * - write and destructive tiers: `create`, `upsert` (`save_*` with an optional `id`),
 *   `update`, `remove`, else `record` (the call is kept as an activity entry).
 */
export type ToolOperation = 'identity' | 'list' | 'get' | 'echo' | 'create' | 'upsert' | 'update' | 'remove' | 'record';

/** How one tool is answered; see `planConnectorTools`. */
export interface ToolPlan {
  readonly tool: CatalogTool;
  readonly operation: ToolOperation;
  /** Collection the tool reads or writes; empty for identity, echo and record. */
  readonly collection: string;
  /** Status an update sets (`cancel_subscription` → `canceled`). */
  readonly status?: string;
  /** Argument whose value picks the operation per call (`issue_write {method: "update"}`). */
  readonly operationArgument?: string;
}

type VerbKind = 'list' | 'get' | 'create' | 'update' | 'remove' | 'act';

const VERB_KINDS: Record<string, VerbKind> = {
  list: 'list', search: 'list', find: 'list',
  get: 'get', read: 'get', fetch: 'get', retrieve: 'get', details: 'get', info: 'get', download: 'get', lookup: 'get', view: 'get',
  create: 'create', add: 'create', save: 'create', send: 'create', schedule: 'create', post: 'create', push: 'create',
  fork: 'create', duplicate: 'create', copy: 'create', deploy: 'create', buy: 'create', write: 'create', apply: 'create',
  update: 'update', edit: 'update', set: 'update', transition: 'update', merge: 'update', pause: 'update', restore: 'update',
  finalize: 'update', reset: 'update', move: 'update', manage: 'update', cancel: 'update', close: 'update', reopen: 'update',
  resolve: 'update', rename: 'update',
  delete: 'remove', remove: 'remove',
  execute: 'act', query: 'act', run: 'act', trigger: 'act', start: 'act', analyze: 'act', check: 'act', suggest: 'act',
  confirm: 'act', invoke: 'act', label: 'act', unlabel: 'act', submit: 'act',
};

/** Status an update verb leaves behind. */
const STATUS_AFTER: Record<string, string> = {
  cancel: 'canceled', close: 'closed', merge: 'merged', pause: 'paused', restore: 'active', finalize: 'finalized',
  reopen: 'open', resolve: 'resolved',
};

/** Words after which a tool name stops naming its subject (`list_tables_for_base`). */
const PREPOSITIONS = new Set(['for', 'to', 'from', 'using', 'in', 'with', 'by', 'of', 'on', 'at', 'into', 'via']);

/** Arguments whose value chooses what a multi-purpose tool does. */
const OPERATION_ARGUMENTS = ['method', 'operation'];

/** Tools whose names do not say what they touch. */
const OVERRIDES: Record<string, Partial<Pick<ToolPlan, 'operation' | 'collection'>>> = {
  'atlassian/getAccessibleAtlassianResources': { collection: 'sites' },
  'notion/notion-fetch': { operation: 'get', collection: 'pages' },
  'notion/notion-search': { operation: 'list', collection: 'pages' },
  'slack/slack_search_public': { operation: 'list', collection: 'messages' },
  'slack/slack_search_public_and_private': { operation: 'list', collection: 'messages' },
  'huggingface/space_info': { operation: 'list' },
  // It unlinks a team; the team itself stays.
  'sentry/remove_team_from_project': { operation: 'record', collection: '' },
};

const IDENTITY_NAME = /(^|_)(me|whoami)$|(^|_)user_(info|data)$/;

interface ParsedName {
  verb?: string;
  kind?: VerbKind;
  nouns: string[];
}

/** Words that only repeat the connector (`slack_`, `notion-`, `hf_` for Hugging Face). */
function prefixWordsOf(connector: Pick<Connector, 'key' | 'label'>): Set<string> {
  const labelWords = wordsOf(connector.label);
  const words = new Set(wordsOf(connector.key));
  if (labelWords.length > 1) words.add(labelWords.map((w) => w[0]).join(''));
  return words;
}

/** Splits a tool name into its verb and the words naming what it acts on. */
function parseToolName(name: string, prefixWords: ReadonlySet<string>): ParsedName {
  const words = wordsOf(name).filter((w) => !prefixWords.has(w));
  const verbAt = words.findIndex((w) => VERB_KINDS[w] !== undefined && VERB_KINDS[w] !== 'act');
  const at = verbAt >= 0 ? verbAt : words.findIndex((w) => VERB_KINDS[w] !== undefined);
  if (at < 0) return { nouns: words };
  const verb = words[at] as string;
  const after = words.slice(at + 1);
  const candidates = after.length > 0 ? after : words.slice(0, at);
  const nouns: string[] = [];
  for (let i = 0; i < candidates.length; i += 1) {
    const word = candidates[i] as string;
    if (PREPOSITIONS.has(word)) break;
    if (word === 'or' || word === 'and') {
      if (VERB_KINDS[candidates[i + 1] ?? ''] !== undefined) i += 1;
      continue;
    }
    nouns.push(word);
  }
  return { verb, kind: VERB_KINDS[verb] as VerbKind, nouns };
}

/** Where `needle` occurs as a run of words inside `haystack`, or -1. */
function indexOfRun(haystack: readonly string[], needle: readonly string[]): number {
  for (let start = 0; start + needle.length <= haystack.length; start += 1) {
    if (needle.every((word, i) => haystack[start + i] === word)) return start;
  }
  return -1;
}

/**
 * The entity type the noun words mention. Reads accept it anywhere (`get_file_metadata` reads
 * a file); writes only as the head noun at the end (`create_schedule_override` does not
 * create a schedule). The longest match wins.
 */
function entityTypeIn(nouns: readonly string[], entityTypes: readonly string[], anywhere: boolean): { type: string; plural: boolean } | undefined {
  const singular = nouns.map(singularOf);
  let best: { type: string; plural: boolean; length: number } | undefined;
  for (const type of entityTypes) {
    const member = memberNameOf(type).split('_');
    const at = indexOfRun(singular, member);
    if (at < 0) continue;
    const end = at + member.length;
    if (!anywhere && end !== singular.length) continue;
    if (best && best.length >= member.length) continue;
    best = { type, plural: isPlural(nouns[end - 1] as string), length: member.length };
  }
  return best && { type: best.type, plural: best.plural };
}

function planRead(tool: CatalogTool, parsed: ParsedName, entityTypes: readonly string[]): Omit<ToolPlan, 'tool'> {
  if (IDENTITY_NAME.test(wordsOf(tool.name).join('_'))) return { operation: 'identity', collection: '' };
  if (parsed.kind !== 'list' && parsed.kind !== 'get') return { operation: 'echo', collection: '' };
  if (parsed.nouns.length === 0) return { operation: 'echo', collection: '' };
  const entity = entityTypeIn(parsed.nouns, entityTypes, true);
  const collection = entity?.type ?? collectionNameOf(parsed.nouns);
  const plural = entity?.plural ?? isPlural(parsed.nouns[parsed.nouns.length - 1] as string);
  return { operation: parsed.kind === 'get' && !plural ? 'get' : 'list', collection };
}

function planWrite(tool: CatalogTool, parsed: ParsedName, entityTypes: readonly string[]): Omit<ToolPlan, 'tool'> {
  const operationArgument = OPERATION_ARGUMENTS.find((name) => tool.params[name]?.type === 'string');
  const withArgument = operationArgument ? { operationArgument } : {};
  const kind = parsed.kind;
  if (parsed.nouns.length === 0 || kind === undefined || kind === 'act' || kind === 'list' || kind === 'get') {
    return { operation: 'record', collection: '', ...withArgument };
  }
  const collection = entityTypeIn(parsed.nouns, entityTypes, false)?.type ?? collectionNameOf(parsed.nouns);
  if (kind === 'create') {
    const upsert = parsed.verb === 'save' && tool.params.id !== undefined && !tool.params.id.required;
    return { operation: upsert ? 'upsert' : 'create', collection, ...withArgument };
  }
  if (kind === 'remove') return { operation: 'remove', collection, ...withArgument };
  const status = STATUS_AFTER[parsed.verb as string];
  return { operation: 'update', collection, ...(status ? { status } : {}), ...withArgument };
}

/**
 * Plans every tool of a connector. A collection is "kept" when it is one of the catalog's
 * entity types or some tool of the connector can create members in it; reads of other
 * collections echo, and updates or removals in them are recorded as activity.
 */
export function planConnectorTools(connector: Connector): Map<string, ToolPlan> {
  const prefixWords = prefixWordsOf(connector);
  const drafts = connector.tools.map((tool): ToolPlan => {
    const parsed = parseToolName(tool.name, prefixWords);
    const plan = tool.tier === 'read' ? planRead(tool, parsed, connector.entityTypes) : planWrite(tool, parsed, connector.entityTypes);
    return { tool, ...plan, ...OVERRIDES[`${connector.key}/${tool.name}`] };
  });
  const kept = new Set(connector.entityTypes);
  for (const plan of drafts) {
    const creates = plan.operation === 'create' || plan.operation === 'upsert' || plan.operationArgument !== undefined;
    if (creates && plan.collection !== '') kept.add(plan.collection);
  }
  return new Map(drafts.map((plan) => [plan.tool.name, settle(plan, kept)]));
}

function settle(plan: ToolPlan, kept: ReadonlySet<string>): ToolPlan {
  if (plan.collection === '' || kept.has(plan.collection)) return plan;
  switch (plan.operation) {
    case 'list':
    case 'get':
      return { tool: plan.tool, operation: 'echo', collection: '' };
    case 'update':
    case 'remove':
      return { tool: plan.tool, operation: 'record', collection: '' };
    default:
      return plan;
  }
}

/**
 * The operation one call performs: the plan's, unless the tool takes its operation as an
 * argument (`label_write {method: "delete"}`), whose first word then decides.
 */
export function operationOfCall(plan: ToolPlan, args: Record<string, unknown>): ToolOperation {
  if (plan.operationArgument === undefined) return plan.operation;
  const value = args[plan.operationArgument];
  if (typeof value !== 'string' || plan.collection === '') return 'record';
  const kind = VERB_KINDS[wordsOf(value)[0] ?? ''];
  if (kind === 'create') return plan.operation === 'upsert' ? 'upsert' : 'create';
  if (kind === 'update' || kind === 'remove') return kind;
  return 'record';
}
