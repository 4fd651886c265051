import { readdirSync, readFileSync } from 'node:fs';

/** Resident set size of a process, from `/proc/<pid>/status` (`VmRSS`, reported in kB). */
export function rssBytesOf(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb) * 1024;
}

/** RSS of one process over a sampled interval, in bytes. */
export interface RssGrowth {
  before: number;
  peak: number;
  /** `peak - before`: what the measured work added at its worst. */
  growth: number;
}

/**
 * Samples the RSS of each named process every `intervalMs` until `stop()`, which returns, per
 * name, the RSS at the start and the highest sample seen. Reads /proc rather than asking the
 * process, so it measures other processes (a gateway, an audit service) as well as this one.
 * A process that exits while sampled keeps the samples taken before.
 */
export function sampleRss<Name extends string>(pids: Record<Name, number>, intervalMs = 50): { stop(): Record<Name, RssGrowth> } {
  const names = Object.keys(pids) as Name[];
  const seen = Object.fromEntries(names.map((name) => {
    const before = rssBytesOf(pids[name]);
    return [name, { before, peak: before }];
  })) as Record<Name, { before: number; peak: number }>;
  const sample = () => {
    for (const name of names) {
      try {
        seen[name].peak = Math.max(seen[name].peak, rssBytesOf(pids[name]));
      } catch {
        // The process is gone; its earlier samples stand.
      }
    }
  };
  const timer = setInterval(sample, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return Object.fromEntries(names.map((name) => [name, { ...seen[name], growth: seen[name].peak - seen[name].before }])) as Record<Name, RssGrowth>;
    },
  };
}

/** User + system CPU time a process (all its threads) has used, from `/proc/<pid>/stat`, in seconds. */
export function cpuSecondsOf(pid: number): number {
  const { user, system } = cpuTimesOf(pid);
  return user + system;
}

/** User and system CPU time a process (all its threads) has used, in seconds. */
export function cpuTimesOf(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start past the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }; // utime, stime in clock ticks (100 Hz)
}

/** CPU seconds (user + system) of each thread name of a process (from `/proc/<pid>/task/<tid>/stat`), summed by name. */
export function cpuByThreadOf(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try { stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8'); } catch { continue; } // the thread ended
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[0-9]+$/, '#');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byName.set(name, (byName.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) / 100);
  }
  return byName;
}
