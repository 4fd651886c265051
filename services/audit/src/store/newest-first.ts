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
  /**
   * The filter picks out a few entries a day (a member or a policy id): a speculative read of
   * the newest day would usually fall short, and the per-day counts are cheap, so they are read
   * first and the page once, from its floor.
   */
  fewPerDay: boolean;
}

/**
 * A page of rows newest first (`timestamp DESC, id DESC`) and the count of every match,
 * without sorting every match. The count and a speculative read of the page from the day
 * before `newest` on are issued together (the usual case: the newest page lies in the newest
 * day or two; a ClickHouse server runs them in parallel, embedded chDB one after the other).
 * That read is the page when it came back full, or when the days it covered hold every match
 * from the offset on. Otherwise one pass counts the matches per day (the
 * table's first sort column); walking those days back from the newest finds the oldest day
 * the page reaches, and the page is read from that day on only.
 *
 * Measured at 10M entries (bench/README, issue 17): the per-day counts cost about twice a
 * count (they read `timestamp` for every match; the count reads only the filter's columns),
 * so they are read only when the speculative read falls short (deep offsets, ranges ending
 * long ago with few matches a day), or first for filters that match few a day (`fewPerDay`).
 */
export async function newestFirstPage(read: NewestFirstRead): Promise<{ rows: AuditRow[]; total: number }> {
  const { limit, offset } = read.page;
  const pageFrom = (floor: string) => read.select<AuditRow>(
    `SELECT ${read.columns} FROM ${read.table} WHERE ${read.where.sql} AND toDate(timestamp) >= {pageFloor:Date}
     ORDER BY timestamp DESC, id DESC LIMIT {limit:UInt32} OFFSET {offset:UInt64}`,
    { ...read.where.params, pageFloor: floor, limit, offset },
  );
  const perDay = () => read.select<{ day: string; n: number | string }>(
    `SELECT toString(toDate(timestamp)) AS day, count() AS n FROM ${read.table} WHERE ${read.where.sql}
     GROUP BY day ORDER BY day DESC`,
    read.where.params,
  );
  const count = async () => Number((await read.select<{ n: number | string }>(
    `SELECT count() AS n FROM ${read.table} WHERE ${read.where.sql}`, read.where.params))[0]?.n ?? 0);
  /** The oldest day the page reaches: where the newest `offset + limit` matches are reached, else the oldest match. */
  const floorOf = (days: Array<{ day: string; n: number | string }>) => {
    let seen = 0;
    for (const d of days) {
      seen += Number(d.n);
      if (seen >= offset + limit) return d.day;
    }
    return days.at(-1)!.day;
  };
  // The speculative read is the page when it came back full, or when the days it covered hold
  // `offset + rows` matches and that is all of them.
  const complete = (rows: AuditRow[], total: number) => rows.length === limit || (rows.length > 0 && offset + rows.length === total);

  const guess = new Date(read.newest.getTime() - 86_400_000).toISOString().slice(0, 10);
  if (read.fewPerDay) {
    const days = await perDay();
    const total = days.reduce((sum, d) => sum + Number(d.n), 0);
    return { rows: total <= offset ? [] : await pageFrom(floorOf(days)), total };
  }
  const [total, guessed] = await Promise.all([count(), pageFrom(guess)]);
  if (total <= offset) return { rows: [], total };
  if (complete(guessed, total)) return { rows: guessed, total };
  const days = await perDay();
  return { rows: days.length === 0 ? [] : await pageFrom(floorOf(days)), total };
}
