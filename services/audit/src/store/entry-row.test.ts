import { describe, expect, it } from 'vitest';
import { makeEntry } from '../testing/audit-entries.ts';
import { fromClickHouseTime, fromRow, toClickHouseTime, toRow } from './entry-row.ts';

describe('entry ↔ row', () => {
  it('round-trips an entry', () => {
    const entry = makeEntry({ toolArgs: { nested: { list: [1, 'two'] } }, matchedPolicyIds: ['k1'], policyDbIds: ['d1'] });
    expect(fromRow(toRow(entry))).toEqual(entry);
  });

  it('keeps an absent session id absent', () => {
    const { sessionId: _omitted, ...entry } = makeEntry();
    const row = toRow(entry);
    expect(row.session_id).toBeNull();
    expect(fromRow(row)).not.toHaveProperty('sessionId');
  });

  it('normalises timestamps with an offset to UTC milliseconds', () => {
    expect(toRow(makeEntry({ timestamp: '2026-10-01T14:00:00.5+02:00' })).timestamp).toBe('2026-10-01 12:00:00.500');
    expect(toClickHouseTime(new Date('2026-01-02T03:04:05.006Z'))).toBe('2026-01-02 03:04:05.006');
    expect(fromClickHouseTime('2026-01-02 03:04:05.006')).toBe('2026-01-02T03:04:05.006Z');
  });
});
