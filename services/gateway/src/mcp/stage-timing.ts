import { performance } from 'node:perf_hooks';
import { histogram } from '@portcullis/core';

/** Buckets from 10 µs to 1 s: the stages of one call are mostly well under a millisecond. */
const STAGE_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1];

/**
 * Where a `/mcp` request spends its time, one series per stage: `key` (member key → caller),
 * `parse` (JSON and the SDK's message schema), `session` (tool-session lookup or creation),
 * `audit_record` (the write-ahead record's
 * acceptance), `upstream` (the connector call), and `request` (the whole request, from its
 * first hook to the reply). The verdict's round trip has its own series,
 * `portcullis_gateway_authorize_duration_seconds`. `bench/mcp-overhead` prints the mean of each.
 */
export type McpStage = 'key' | 'parse' | 'session' | 'audit_record' | 'upstream' | 'request';

const stageSeconds = histogram('portcullis_gateway_mcp_stage_seconds', 'Time a /mcp request spends in each stage', ['stage'], STAGE_BUCKETS);

/** Starts timing `stage`; the returned function records it. */
export function startStage(stage: McpStage): () => void {
  const started = performance.now();
  return () => stageSeconds.observe({ stage }, (performance.now() - started) / 1000);
}

/** Runs `work` as `stage` (without an async frame of its own: this wraps every stage of every call). */
export function timed<T>(stage: McpStage, work: () => Promise<T>): Promise<T> {
  const done = startStage(stage);
  let running: Promise<T>;
  try {
    running = work();
  } catch (err) {
    done();
    throw err;
  }
  running.then(done, done);
  return running;
}
