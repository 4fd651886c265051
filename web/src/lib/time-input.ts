// Conversions between `datetime-local` fields (the reader's local time) and the API's ISO instants.

/** An ISO instant as a `datetime-local` input value (the reader's local time), or '' when not one. */
export function toLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return '';
  const local = new Date(at.getTime() - at.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

/**
 * A `datetime-local` value (local time) as an ISO instant in UTC, or undefined when empty. It keeps
 * the precision the person picked: a minute stays a minute (`…T21:12Z`), so a `to` of 21:12 covers
 * the whole minute (bounds are inclusive at the precision written, decision 003).
 */
export function fromLocalInput(value: string): string | undefined {
  if (!value) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) return undefined;
  const iso = at.toISOString();
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(value) ? `${iso.slice(0, 16)}Z` : iso;
}
