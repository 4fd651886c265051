/**
 * Word handling for tool and collection names. The catalog names tools in several styles
 * (`list_issues`, `getJiraIssue`, `notion-fetch`, `kv_namespace_create`); the planner
 * reads them all as lowercase word lists.
 */

/** `getJiraIssue` → `['get', 'jira', 'issue']`; `notion-create-pages` → `['notion', 'create', 'pages']`. */
export function wordsOf(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word.length > 0);
}

/** Words the suffix rules below get wrong, both ways. */
const IRREGULAR_SINGULARS: Record<string, string> = { canvases: 'canvas', aliases: 'alias', people: 'person', data: 'data', metadata: 'metadata' };
const IRREGULAR_PLURALS: Record<string, string> = Object.fromEntries(Object.entries(IRREGULAR_SINGULARS).map(([p, s]) => [s, p]));

/** English singular of one lowercase word; words that are not plurals come back unchanged. */
export function singularOf(word: string): string {
  const irregular = IRREGULAR_SINGULARS[word];
  if (irregular !== undefined) return irregular;
  if (IRREGULAR_PLURALS[word] !== undefined) return word;
  if (word.endsWith('ies') && word.length > 4) return word.slice(0, -3) + 'y';
  if (/(ss|sh|ch|x|us)es$/.test(word)) return word.slice(0, -2);
  if (/(ss|us|is)$/.test(word)) return word;
  if (word.endsWith('s') && word.length > 2) return word.slice(0, -1);
  return word;
}

/** English plural of one lowercase word. */
export function pluralOf(word: string): string {
  const irregular = IRREGULAR_PLURALS[word];
  if (irregular !== undefined) return irregular;
  if (/[^aeiou]y$/.test(word)) return word.slice(0, -1) + 'ies';
  if (/(s|x|ch|sh)$/.test(word)) return word + 'es';
  return word + 's';
}

/** True when the word reads as a plural (`teams`, `policies`), false for `status`, `address`. */
export function isPlural(word: string): boolean {
  return singularOf(word) !== word;
}

/** `['pull', 'requests']` → `pull_requests`: every word singular, the last one pluralised. */
export function collectionNameOf(nounWords: readonly string[]): string {
  const singular = nounWords.map(singularOf);
  const last = singular.pop();
  if (last === undefined) return '';
  return [...singular, pluralOf(last)].join('_');
}

/** `kv_namespaces` → `kv_namespace`: the name of one member of a collection. */
export function memberNameOf(collection: string): string {
  const parts = collection.split('_');
  const last = parts.pop() ?? '';
  return [...parts, singularOf(last)].join('_');
}
