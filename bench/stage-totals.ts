// The gateway's per-stage timing histogram (`portcullis_gateway_mcp_stage_seconds`) read from a Prometheus scrape.

export type StageTotals = Map<string, { sum: number; count: number }>;

/** Sum and count of each stage of `portcullis_gateway_mcp_stage_seconds` (and of the authorize round trip) in a Prometheus scrape. */
export function stageTotals(text: string): StageTotals {
  const totals: StageTotals = new Map();
  const add = (stage: string, field: string, value: string) => {
    const entry = totals.get(stage) ?? { sum: 0, count: 0 };
    entry[field as 'sum' | 'count'] = Number(value);
    totals.set(stage, entry);
  };
  for (const match of text.matchAll(/^portcullis_gateway_mcp_stage_seconds_(sum|count)\{stage="([a-z_]+)"\} ([0-9.e+-]+)$/gm)) add(match[2]!, match[1]!, match[3]!);
  // The verdict's round trip is timed by its own series.
  for (const match of text.matchAll(/^portcullis_gateway_authorize_duration_seconds_(sum|count) ([0-9.e+-]+)$/gm)) add('authorize', match[1]!, match[2]!);
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
