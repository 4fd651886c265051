import { describe, expect, it } from 'vitest';
import { fromLocalInput, toLocalInput } from '../../web/src/lib/time-input.ts';

/** The audit page's time fields send the precision a person picked (decision 003: `to` is inclusive at it). */
describe('audit time fields', () => {
  it('a minute picked in the field is sent as a minute, so `to` covers the whole minute', () => {
    const sent = fromLocalInput('2026-11-24T21:12');
    expect(sent).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z$/);
    expect(new Date(sent!).getTime()).toBe(new Date('2026-11-24T21:12').getTime());
  });

  it('a value with seconds keeps its seconds; empty or invalid sends nothing', () => {
    expect(fromLocalInput('2026-11-24T21:12:30')).toBe(new Date('2026-11-24T21:12:30').toISOString());
    expect(fromLocalInput('')).toBeUndefined();
    expect(fromLocalInput('not a date')).toBeUndefined();
  });

  it('round-trips through the field', () => {
    expect(toLocalInput(fromLocalInput('2026-11-24T21:12'))).toBe('2026-11-24T21:12');
  });
});
