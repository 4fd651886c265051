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
 * without sorting every match. The usual page lies in the newest day or two, so three reads go
 * at once: the count of every match (the one scan), the count of matches from the day before
 * `newest` (the sort key's first column bounds it to those days) and the page from that day.
 * When the recent count holds the whole page, that page is the answer. Otherwise one pass
 * counts the matches per day, walking those days back from the newest finds the oldest day
 * the page reaches, and the page is read from that day on only.
 */
export async function newestFirstPage(read: NewestFirstRead): Promise<{ rows: AuditRow[]; total: number }> {
  const pageFrom = (floor: string | undefined) => read.select<AuditRow>(
    `SELECT ${read.columns} FROM ${read.table} WHERE ${read.where.sql}${floor ? ' AND toDate(timestamp) >= {pageFloor:Date}' : ''}
     ORDER BY timestamp DESC, id DESC LIMIT {limit:UInt32} OFFSET {offset:UInt64}`,
    { ...read.where.params, ...(floor ? { pageFloor: floor } : {}), limit: read.page.limit, offset: read.page.offset },
  );
  const countFrom = async (floor: string | undefined) => {
    const [row] = await read.select<{ n: number | string }>(
      `SELECT count() AS n FROM ${read.table} WHERE ${read.where.sql}${floor ? ' AND toDate(timestamp) >= {pageFloor:Date}' : ''}`,
      { ...read.where.params, ...(floor ? { pageFloor: floor } : {}) },
    );
    return Number(row?.n ?? 0);
  };
  const need = read.page.offset + read.page.limit;
  const guess = new Date(read.newest.getTime() - 86_400_000).toISOString().slice(0, 10);
  const [total, recent, guessed] = await Promise.all([countFrom(undefined), countFrom(guess), pageFrom(guess)]);
  if (recent >= need || recent === total) return { rows: guessed, total };
  if (total <= read.page.offset) return { rows: [], total };

  const days = await read.select<{ day: string; n: number | string }>(
    `SELECT toString(toDate(timestamp)) AS day, count() AS n FROM ${read.table} WHERE ${read.where.sql}
     GROUP BY day ORDER BY day DESC`,
    read.where.params,
  );
  let seen = 0;
  // The oldest day the page reaches: where the newest `need` matches are reached, else the oldest match.
  let floor = days.at(-1)?.day;
  for (const d of days) {
    seen += Number(d.n);
    if (seen >= need) { floor = d.day; break; }
  }
  return { rows: await pageFrom(floor), total };
}
