// The gateway's per-stage timing histogram (`portcullis_gateway_mcp_stage_seconds`) read from a Prometheus scrape.

export type StageTotals = Map<string, { sum: number; count: number }>;

/** Sum and count of each stage of `portcullis_gateway_mcp_stage_seconds` in a Prometheus scrape. */
export function stageTotals(text: string): StageTotals {
  const totals: StageTotals = new Map();
  for (const match of text.matchAll(/^portcullis_gateway_mcp_stage_seconds_(sum|count)\{stage="([a-z_]+)"\} ([0-9.e+-]+)$/gm)) {
    const entry = totals.get(match[2]!) ?? { sum: 0, count: 0 };
    entry[match[1] as 'sum' | 'count'] = Number(match[3]);
    totals.set(match[2]!, entry);
  }
  return totals;
}

/** A markdown table of each stage's calls and mean time between two scrapes. */
export function stageBreakdown(before: StageTotals, after: StageTotals): string[] {
  const rows = ['| stage (mean over the sequential phase) | calls | mean µs |', '|---|---:|---:|'];
  for (const [stage, { sum, count }] of after) {
    const was = before.get(stage) ?? { sum: 0, count: 0 };
    const n = count - was.count;
    if (n > 0) rows.push(`| ${stage} | ${n} | ${((sum - was.sum) / n * 1e6).toFixed(0)} |`);
  }
  return rows;
}
