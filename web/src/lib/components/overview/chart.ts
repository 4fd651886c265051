// Small helpers of the console's charts: axis tops and bucket labels.
import { formatDateTime, timePrefs } from '$lib/datetime.svelte.ts';

/** A round top for a y axis: 1, 2, 5 × 10ⁿ, at least 4. */
export function niceMax(n: number): number {
  if (n <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= n) return step * magnitude;
  return 10 * magnitude;
}

const DAY = 86_400_000;

/**
 * A bucket's start as an axis label, by the dashboard's one formatter (local or UTC): the time
 * of day when the chart spans up to two days, the day otherwise; `full` (tooltips, tables)
 * always says both.
 */
export function bucketLabel(iso: string, spanMs: number, full = false): string {
  if (full) return formatDateTime(iso) || iso;
  const text = formatDateTime(iso, spanMs <= 2 * DAY ? 'time' : 'date', timePrefs.utc) || iso;
  // The axis has no room for seconds or the zone: the legend's table says them.
  return spanMs <= 2 * DAY ? text.replace(/:\d{2}(?= UTC|$)/, '').replace(' UTC', '') : text;
}

/** `12.5 %` — a share for tables, `—` when there is nothing to divide. */
export function percent(part: number, whole: number): string {
  if (!whole) return '—';
  const value = (100 * part) / whole;
  return `${value >= 10 || value === 0 ? Math.round(value) : value.toFixed(1)} %`;
}
