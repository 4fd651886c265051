import { describe, expect, it } from 'vitest';
import { DAY, MAX_BUCKETS, timeBucketsOf } from './time-buckets.ts';

const at = (iso: string) => Date.parse(iso);

describe('timeBucketsOf', () => {
  it.each<[string, string, string, number]>([
    ['15 minutes: 1-minute buckets', '2026-11-01T10:00:00Z', '2026-11-01T10:15:00Z', 60],
    ['1 hour: 1-minute buckets', '2026-11-01T10:00:00Z', '2026-11-01T11:00:00Z', 60],
    ['24 hours: 15-minute buckets', '2026-11-01T10:00:00Z', '2026-11-02T10:00:00Z', 900],
    ['7 days: 1-hour buckets', '2026-11-01T00:00:00Z', '2026-11-08T00:00:00Z', 3600],
    ['30 days: 6-hour buckets', '2026-10-01T00:00:00Z', '2026-10-31T00:00:00Z', 6 * 3600],
    ['a year: 2-day buckets', '2025-11-01T00:00:00Z', '2026-11-01T00:00:00Z', 2 * 86_400],
    ['one instant: 1-minute buckets', '2026-11-01T10:00:00Z', '2026-11-01T10:00:00Z', 60],
  ])('%s', (_label, from, to, seconds) => {
    const b = timeBucketsOf(at(from), at(to));
    expect(b.bucketMs).toBe(seconds * 1000);
    expect(b.count).toBeGreaterThanOrEqual(1);
    expect(b.count).toBeLessThanOrEqual(MAX_BUCKETS);
  });

  it('covers both ends, aligned to multiples of the width since the epoch', () => {
    const from = at('2026-11-01T10:07:31.250Z'), to = at('2026-11-02T09:59:59.999Z');
    const b = timeBucketsOf(from, to);
    expect(b.originMs % b.bucketMs).toBe(0);
    expect(b.originMs).toBeLessThanOrEqual(from);
    expect(b.originMs + b.count * b.bucketMs).toBeGreaterThan(to);
    expect(b.originMs + (b.count - 1) * b.bucketMs).toBeLessThanOrEqual(to);
    expect(new Date(b.originMs).toISOString()).toBe('2026-11-01T10:00:00.000Z');
  });

  it('stays within the bar count for any range, out to centuries', () => {
    for (const span of [1, 59_999, 3_600_000, 199 * 60_000, 200 * 60_000, 201 * 60_000, 199 * DAY, 200 * DAY, 400 * DAY, 150 * 365 * DAY]) {
      for (const from of [0, at('2026-11-01T10:07:31Z'), at('1900-01-01T00:00:00Z')]) {
        const b = timeBucketsOf(from, from + span);
        expect(b.count, `span ${span}`).toBeLessThanOrEqual(MAX_BUCKETS);
        expect(b.originMs + b.count * b.bucketMs).toBeGreaterThan(from + span);
        expect(b.bucketMs % 1000).toBe(0);
      }
    }
  });
});
