// Small helpers of the console's charts: axis tops and bucket labels.

/** A round top for a y axis: 1, 2, 5 × 10ⁿ, at least 4. */
export function niceMax(n: number): number {
  if (n <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= n) return step * magnitude;
  return 10 * magnitude;
}

const DAY = 86_400_000;
const timeOnly = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const dayOnly = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });
const dayTime = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

/**
 * A bucket's start as an axis label: the time of day when the chart spans up to two days, the
 * day otherwise; `full` (tooltips, tables) always says both.
 */
export function bucketLabel(iso: string, spanMs: number, full = false): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  if (full) return dayTime.format(at);
  return spanMs <= 2 * DAY ? timeOnly.format(at) : dayOnly.format(at);
}

/** `12.5 %` — a share for tables, `—` when there is nothing to divide. */
export function percent(part: number, whole: number): string {
  if (!whole) return '—';
  const value = (100 * part) / whole;
  return `${value >= 10 || value === 0 ? Math.round(value) : value.toFixed(1)} %`;
}
