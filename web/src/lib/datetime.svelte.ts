/**
 * The dashboard's one date and time formatter (decision 042). Every page shows instants through
 * `formatDateTime` (or `<Time>`), in the reader's local zone or in UTC — one toggle in the
 * header, remembered in this browser.
 */
import { formatInstant, formatRelative as relative, type TimeStyle } from './datetime.ts';

const KEY = 'portcullis.timeZone';

function storedUtc(): boolean {
  try { return typeof localStorage !== 'undefined' && localStorage.getItem(KEY) === 'utc'; } catch { return false; }
}

/** The reader's choice: local time (default) or UTC. */
export const timePrefs = $state({ utc: storedUtc() });

export function setUtc(utc: boolean): void {
  timePrefs.utc = utc;
  try { localStorage.setItem(KEY, utc ? 'utc' : 'local'); } catch { /* private mode: the choice lasts this page only */ }
}

export type { TimeStyle } from './datetime.ts';

/**
 * An instant for people: `Nov 26, 10:42` (the year only when it is not this one), `UTC` added
 * when the header toggle says so; '' for a missing or invalid value.
 */
export function formatDateTime(value: string | number | Date | null | undefined, style: TimeStyle = 'datetime', utc = timePrefs.utc): string {
  return formatInstant(value, style, utc);
}

/** `just now`, `5 min ago`, `3 h ago`, `2 days ago`; the full form past a week. */
export function formatRelative(value: string | null | undefined, now = Date.now()): string {
  return relative(value, now, timePrefs.utc);
}
