import { describe, expect, it } from 'vitest';
import { auditHref, entryHref, explorerViewFromQuery, queryOfExplorerView, resolvedFilters } from '../../web/src/lib/components/audit/explorer.ts';

/** The audit explorer's URL is its view (decision 043): what links write is what the page reads. */
describe('audit explorer URL', () => {
  it('a relative preset stays relative in the URL and becomes `from = now − range` for the API', () => {
    const view = explorerViewFromQuery(new URLSearchParams('range=1h&result=DENY&from=2026-01-01'));
    expect(view.range).toBe('1h');
    expect(view.filters).toEqual({ result: 'DENY' }); // the preset wins over absolute bounds
    expect(queryOfExplorerView(view)).toBe('result=DENY&range=1h');
    const now = Date.parse('2026-11-26T12:00:00Z');
    expect(resolvedFilters(view, now)).toEqual({ result: 'DENY', from: '2026-11-26T11:00:00.000Z' });
  });

  it('an unknown preset is ignored, absolute bounds are kept, defaults stay out of the URL', () => {
    const view = explorerViewFromQuery(new URLSearchParams('range=2y&from=2026-11-01T00:00:00.000Z&limit=50&offset=0'));
    expect(view.range).toBeUndefined();
    expect(queryOfExplorerView(view)).toBe('from=2026-11-01T00%3A00%3A00.000Z');
    expect(resolvedFilters(view)).toEqual({ from: '2026-11-01T00:00:00.000Z' });
  });

  it('links from the overview and from simulation samples read back as the same filters', () => {
    const href = auditHref({ service: 'github', tool: 'delete_repository', result: 'DENY', range: '24h' });
    expect(href).toBe('/audit?service=github&tool=delete_repository&result=DENY&range=24h');
    expect(explorerViewFromQuery(new URL(href, 'http://x').searchParams)).toMatchObject({ range: '24h', filters: { service: 'github', tool: 'delete_repository', result: 'DENY' } });
    expect(auditHref({})).toBe('/audit');

    const at = '2026-11-26T11:17:35.123Z';
    const entry = new URL(entryHref({ entryId: 'e1', timestamp: at, memberId: 'm1', service: 'github', tool: 'get_me' }), 'http://x');
    expect(explorerViewFromQuery(entry.searchParams).filters).toEqual({ from: at, to: at, service: 'github', tool: 'get_me', member: 'm1' });
    expect(entry.searchParams.get('entry')).toBe('e1');
  });
});
