/**
 * The audit filters' `from` and `to` (GET /api/audit, its export, the live stream, the
 * dashboard counters, the audit service): ISO 8601, both **inclusive at the precision they
 * are written in** (decision 003). `from` is the first millisecond of what it names, `to` the
 * last: `to=2026-10-01` ends at 23:59:59.999 of that day, `to=2026-10-01T21:12Z` at
 * 21:12:59.999, `to=…T21:12:05Z` at 21:12:05.999, `to=…T21:12:05.3Z` at 21:12:05.399, and
 * milliseconds (or finer, cut to the store's milliseconds) name that millisecond. So
 * `from=to=<a minute>` is that whole minute. A value without an offset is UTC.
 */

const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

const MS_PER_DAY = 86_400_000;

/** How many milliseconds past its start the value's last millisecond is, at the precision written. */
function spanOf(hour: string | undefined, second: string | undefined, fraction: string | undefined): number {
  if (hour === undefined) return MS_PER_DAY - 1;
  if (second === undefined) return 60_000 - 1;
  if (fraction === undefined) return 1_000 - 1;
  return fraction.length >= 3 ? 0 : 10 ** (3 - fraction.length) - 1;
}

/**
 * An audit range bound as epoch milliseconds (see the module comment), or undefined when
 * `value` is not an ISO 8601 date or date-time (or names a day, hour or offset that does not
 * exist). Callers turn undefined into their own 400 / INVALID_ARGUMENT naming the parameter.
 */
export function parseAuditBound(value: string, bound: 'from' | 'to'): number | undefined {
  const match = ISO_8601.exec(value);
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s, fraction, offset] = match;
  const year = Number(y), month = Number(mo), day = Number(d);
  const hour = Number(h ?? 0), minute = Number(mi ?? 0), second = Number(s ?? 0);
  const millis = fraction ? Number(fraction.slice(0, 3).padEnd(3, '0')) : 0;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, millis);
  const check = new Date(utc);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (offset && offset !== 'Z' && offset !== 'z') {
    const digits = offset.slice(1).replace(':', '');
    const hours = Number(digits.slice(0, 2)), minutes = Number(digits.slice(2) || 0);
    if (hours > 23 || minutes > 59) return undefined;
    offsetMinutes = (offset.startsWith('-') ? -1 : 1) * (hours * 60 + minutes);
  }
  return utc - offsetMinutes * 60_000 + (bound === 'to' ? spanOf(h, s, fraction) : 0);
}
