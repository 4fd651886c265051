import { wordsOf } from './words.ts';

/**
 * Which arguments name a member of a collection. `get_issue {id}`, `issue_read {issue_number}`,
 * `getJiraIssue {issueIdOrKey}`, `kv_namespace_delete {namespace_id}` and
 * `delete_repository {repo}` all point at one record; `owner`, `teamId` on an issue or
 * `baseId` on a record only narrow the search (scope).
 */

const GENERIC_IDENTIFIERS = new Set(['id', 'key', 'slug', 'name', 'title', 'number', 'path', 'login', 'idorurl', 'idorkey']);
const IDENTIFIER_SUFFIXES = ['', 'id', 'key', 'slug', 'number', 'name', 'idorkey', 'idorurl'];
/** Other names the catalog uses for some members (`repo` for a repository, `pullNumber`). */
const ABBREVIATIONS: Record<string, string> = { repository: 'repo', organization: 'org', pullrequest: 'pull', worker: 'script', dsn: 'key' };

function normalized(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/**
 * The names a member of the collection goes by, normalised: `pull_request` →
 * `pullrequest`, `request`, `pull`; `kv_namespace` → `kvnamespace`, `namespace`;
 * `repository` → `repository`, `repo`.
 */
export function memberVariantsOf(memberName: string): string[] {
  const words = wordsOf(memberName);
  const variants = new Set<string>();
  for (let start = 0; start < words.length; start += 1) variants.add(words.slice(start).join(''));
  for (const variant of [...variants]) {
    const short = ABBREVIATIONS[variant];
    if (short) variants.add(short);
  }
  return [...variants];
}

/** A predicate telling whether an argument or field name identifies a member. */
export type IdentifierTest = (name: string) => boolean;

/** How the members of one collection are named by arguments and by other records' fields. */
export interface MemberNaming {
  /** Any name that identifies the member: generic (`id`, `name`) or specific (`issue_number`). */
  readonly isIdentifier: IdentifierTest;
  /** Only the specific ones, which another record uses to point at it (`channel_id` on a message). */
  readonly isReference: IdentifierTest;
}

/** Builds the naming rules for the members of one collection (see the module comment). */
export function memberNamingOf(memberName: string): MemberNaming {
  const specific = new Set<string>();
  for (const variant of memberVariantsOf(memberName)) {
    for (const suffix of IDENTIFIER_SUFFIXES) specific.add(variant + suffix);
  }
  for (const generic of GENERIC_IDENTIFIERS) specific.delete(generic);
  return {
    isIdentifier: (name) => {
      const n = normalized(name);
      return GENERIC_IDENTIFIERS.has(n) || specific.has(n);
    },
    isReference: (name) => specific.has(normalized(name)),
  };
}

/** The comparable form of an identifying value, or undefined for values that cannot identify. */
export function identifyingValue(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value.toLowerCase() : undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}
