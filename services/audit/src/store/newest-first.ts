import type { BoundWhere } from './audit-filter.ts';
import type { AuditRow } from './entry-row.ts';

export interface NewestFirstRead {
  select<T>(query: string, params: Record<string, unknown>): Promise<T[]>;
  /** The table (a `{database:Identifier}.name` fragment), sorted by day first. */
  table: string;
  columns: string;
  where: BoundWhere;
  page: { limit: number; offset: number };
  /** No match is newer than this (the filter's `to`, else now): where the speculative read starts. */
  newest: Date;
}

/**
 * A page of rows newest first (`timestamp DESC, id DESC`) and the count of every match,
 * without sorting every match. One pass counts the matches per day (the table's first sort
 * column); walking those days back from the newest finds the oldest day the page reaches, and
 * the page is read from that day on only. Beside that pass, the page is read speculatively
 * from the day before `newest` (the usual case: the newest page lies in the newest day or
 * two); it is kept when the day counts show it holds the whole page, else read again.
 * (Measured against counting first and reading the per-day counts only when the recent count
 * falls short: that was faster for frequent filters and slower for rare ones, 981 against
 * 901 ms summed over the bench's nine filter kinds at 10M entries.)
 */
export async function newestFirstPage(read: NewestFirstRead): Promise<{ rows: AuditRow[]; total: number }> {
  const pageFrom = (floor: string | undefined) => read.select<AuditRow>(
    `SELECT ${read.columns} FROM ${read.table} WHERE ${read.where.sql}${floor ? ' AND toDate(timestamp) >= {pageFloor:Date}' : ''}
     ORDER BY timestamp DESC, id DESC LIMIT {limit:UInt32} OFFSET {offset:UInt64}`,
    { ...read.where.params, ...(floor ? { pageFloor: floor } : {}), limit: read.page.limit, offset: read.page.offset },
  );
  const guess = new Date(read.newest.getTime() - 86_400_000).toISOString().slice(0, 10);
  const [days, guessed] = await Promise.all([
    read.select<{ day: string; n: number | string }>(
      `SELECT toString(toDate(timestamp)) AS day, count() AS n FROM ${read.table} WHERE ${read.where.sql}
       GROUP BY day ORDER BY day DESC`,
      read.where.params,
    ),
    pageFrom(guess),
  ]);
  const total = days.reduce((sum, d) => sum + Number(d.n), 0);
  if (total <= read.page.offset) return { rows: [], total };
  const need = read.page.offset + read.page.limit;
  let seen = 0;
  // The oldest day the page reaches: where the newest `need` matches are reached, else the oldest match.
  let floor = days.at(-1)!.day;
  for (const d of days) {
    seen += Number(d.n);
    if (seen >= need) { floor = d.day; break; }
  }
  return { rows: floor >= guess ? guessed : await pageFrom(floor), total };
}
