/**
 * The buckets of a histogram over a time range: a width chosen from the range so a chart gets
 * at most `MAX_BUCKETS` bars, aligned to whole multiples of the width since the epoch (UTC), so
 * the same instant falls in the same bucket whatever range it is seen in (minutes on the
 * minute, hours on the hour, days at midnight UTC).
 */

/** Most buckets a histogram has. */
export const MAX_BUCKETS = 200;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** Widths tried in order, 1 minute to 1 day; longer ranges take whole days. */
const LADDER_MS = [MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY];

export interface TimeBuckets {
  /** Width of one bucket in milliseconds (a whole number of seconds). */
  bucketMs: number;
  /** Start of the first bucket: `from` rounded down to a multiple of `bucketMs`. */
  originMs: number;
  /** How many buckets cover `[from, to]` (1 .. `MAX_BUCKETS`). */
  count: number;
}

/**
 * The buckets covering the inclusive range `[fromMs, toMs]`: the narrowest width of the ladder
 * that covers it in at most `MAX_BUCKETS` aligned buckets, else the fewest whole days that do.
 */
export function timeBucketsOf(fromMs: number, toMs: number): TimeBuckets {
  const span = Math.max(0, toMs - fromMs);
  // Aligned buckets covering a span s with width w number at most floor(s / w) + 2.
  const fits = (width: number) => Math.floor(span / width) + 2 <= MAX_BUCKETS;
  const bucketMs = LADDER_MS.find(fits) ?? DAY * Math.ceil(span / DAY / (MAX_BUCKETS - 2));
  const originMs = Math.floor(fromMs / bucketMs) * bucketMs;
  return { bucketMs, originMs, count: Math.floor((toMs - originMs) / bucketMs) + 1 };
}
