import { describe, expect, it } from 'vitest';
import { formatInstant, formatRelative } from '../../web/src/lib/datetime.ts';

/** Issue 18 item 7: one date/time formatter, local or UTC. */
describe('the dashboard date/time formatter', () => {
  const thisYear = new Date().getUTCFullYear();
  const at = `${thisYear}-03-04T05:06:07Z`;

  it('in UTC says so, leaves out this year and keeps seconds where asked', () => {
    const text = formatInstant(at, 'datetime', true);
    expect(text).toMatch(/UTC$/);
    expect(text).toMatch(/05:06/);
    expect(text).not.toMatch(String(thisYear));
    expect(formatInstant(at, 'seconds', true)).toMatch(/05:06:07/);
    expect(formatInstant(`${thisYear - 1}-03-04T05:06:07Z`, 'date', true)).toMatch(String(thisYear - 1));
  });

  it('answers empty for nothing or nonsense; relative times read as people say them', () => {
    expect(formatInstant(undefined)).toBe('');
    expect(formatInstant('not a date')).toBe('');
    const now = Date.parse(at);
    expect(formatRelative(new Date(now - 10_000).toISOString(), now)).toBe('just now');
    expect(formatRelative(new Date(now - 5 * 60_000).toISOString(), now)).toBe('5 min ago');
    expect(formatRelative(new Date(now - 3 * 3_600_000).toISOString(), now)).toBe('3 h ago');
  });
});
