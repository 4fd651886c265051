/**
 * The dashboard's one date and time formatter, as pure functions (decision 042); the reader's
 * local-or-UTC choice lives in `datetime.svelte.ts`, which pages import.
 */
export type TimeStyle = 'datetime' | 'date' | 'time' | 'seconds';

const formats = new Map<string, Intl.DateTimeFormat>();
function formatter(style: TimeStyle, utc: boolean, withYear: boolean): Intl.DateTimeFormat {
  const key = `${style}|${utc}|${withYear}`;
  let format = formats.get(key);
  if (!format) {
    const options: Intl.DateTimeFormatOptions = { hourCycle: 'h23', ...(utc ? { timeZone: 'UTC' } : {}) };
    if (style !== 'time') Object.assign(options, { month: 'short', day: 'numeric', ...(withYear ? { year: 'numeric' } : {}) });
    if (style !== 'date') Object.assign(options, { hour: '2-digit', minute: '2-digit', ...(style === 'seconds' || style === 'time' ? { second: '2-digit' } : {}) });
    format = new Intl.DateTimeFormat(undefined, options);
    formats.set(key, format);
  }
  return format;
}

/**
 * An instant for people: `Nov 26, 10:42` (the year only when it is not this one), `UTC` added
 * when the toggle says so; '' for a missing or invalid value.
 */
export function formatInstant(value: string | number | Date | null | undefined, style: TimeStyle = 'datetime', utc = false): string {
  if (value === null || value === undefined || value === '') return '';
  const at = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(at.getTime())) return '';
  const year = utc ? at.getUTCFullYear() : at.getFullYear();
  const text = formatter(style, utc, year !== new Date().getFullYear()).format(at);
  return utc && style !== 'date' ? `${text} UTC` : text;
}

/** `just now`, `5 min ago`, `3 h ago`, `2 days ago`; the full form past a week. */
export function formatRelative(value: string | null | undefined, now = Date.now(), utc = false): string {
  if (!value) return '';
  const at = new Date(value).getTime();
  if (Number.isNaN(at)) return '';
  const seconds = Math.round((now - at) / 1000);
  if (seconds < 45) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h ago`;
  if (seconds < 7 * 86_400) return `${Math.round(seconds / 86_400)} days ago`;
  return formatInstant(value, 'datetime', utc);
}
