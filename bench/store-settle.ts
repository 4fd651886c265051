import type { Session } from 'chdb';

/**
 * Waits until the engine runs no background merge (two quiet checks a second apart), at most
 * `timeoutMs`; returns the seconds waited. Seeding 10M rows in a minute leaves a merge backlog
 * (the parts of ten 1M-row inserts, their projection parts) that an analyst's store, written
 * continuously, does not have: measured before settling, queries and exports share the two
 * cores with those merges (the audit service spent 18.6 CPU-seconds on a 17 s export, the
 * gateway 8.8). Queries and exports are measured on a settled store, their baselines too.
 */
export async function untilMergesSettle(session: Session, timeoutMs = 180_000): Promise<number> {
  const started = performance.now();
  let quiet = 0;
  while (quiet < 2 && performance.now() - started < timeoutMs) {
    const running = Number((await session.queryAsync('SELECT count() FROM system.merges', { format: 'TSV' })).text().trim());
    quiet = running === 0 ? quiet + 1 : 0;
    if (quiet < 2) await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  return (performance.now() - started) / 1000;
}
