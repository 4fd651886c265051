/** A token bucket's shape: `burst` tokens at most, refilled at `perSecond`. */
export interface BucketRate { perSecond: number; burst: number }

/** Why `take` refused: the bucket that ran dry and how long until it holds enough again. */
export interface BucketRefusal { bucket: string; retryAfterMs: number }

interface Bucket { tokens: number; at: number }

/**
 * Token buckets in this process's memory, one per key (a member key, an agent, a client IP…),
 * each created full on first use. `take` draws from several buckets at once or from none, so
 * a refused request costs no bucket anything. Buckets that have refilled to full are the same
 * as absent ones and are dropped once there are more than `maxKeys` (a sweep at most once a
 * second), so the map stays bounded by the keys that are really in use.
 */
export function createTokenBuckets(o: { now?: () => number; maxKeys?: number } = {}) {
  const now = o.now ?? (() => performance.now());
  const maxKeys = o.maxKeys ?? 50_000;
  const buckets = new Map<string, Bucket>();
  /** When the map last was swept: at most once a second, so a map of live buckets is not walked on every request. */
  let sweptAt = -Infinity;

  function level(key: string, rate: BucketRate, at: number): Bucket {
    const bucket = buckets.get(key);
    if (!bucket) return { tokens: rate.burst, at };
    return { tokens: Math.min(rate.burst, bucket.tokens + ((at - bucket.at) / 1000) * rate.perSecond), at };
  }

  function sweep(at: number, rates: Map<string, BucketRate>) {
    for (const [key, bucket] of buckets) {
      const rate = rates.get(key.slice(0, key.indexOf(':')));
      if (!rate || bucket.tokens + ((at - bucket.at) / 1000) * rate.perSecond >= rate.burst) buckets.delete(key);
    }
  }
  /** Each bucket family's rate, by the prefix of its keys (`key:…`, `agent:…`), for the sweep. */
  const rates = new Map<string, BucketRate>();

  return {
    /**
     * Takes `count` tokens from every named bucket (`family:id`), or none when one of them holds
     * fewer: then answers which one and the wait until it would hold `count` (at least 1 ms).
     */
    take(wants: Array<{ family: string; id: string; rate: BucketRate }>, count = 1): BucketRefusal | undefined {
      const at = now();
      const levels = wants.map((w) => ({ key: `${w.family}:${w.id}`, rate: w.rate, bucket: level(`${w.family}:${w.id}`, w.rate, at) }));
      for (const { key, rate, bucket } of levels) {
        if (bucket.tokens < count) {
          const short = Math.min(count, rate.burst) - bucket.tokens;
          return { bucket: key.slice(0, key.indexOf(':')), retryAfterMs: Math.max(1, Math.ceil((short / rate.perSecond) * 1000)) };
        }
      }
      for (const { key, rate, bucket } of levels) {
        rates.set(key.slice(0, key.indexOf(':')), rate);
        buckets.set(key, { tokens: bucket.tokens - count, at });
      }
      if (buckets.size > maxKeys && at - sweptAt >= 1000) {
        sweptAt = at;
        sweep(at, rates);
      }
      return undefined;
    },
    /** Whether the bucket holds fewer than one token (nothing is taken). */
    isEmpty(family: string, id: string, rate: BucketRate): boolean {
      return level(`${family}:${id}`, rate, now()).tokens < 1;
    },
    /** Buckets held (for tests of the bound). */
    get size() { return buckets.size; },
  };
}

export type TokenBuckets = ReturnType<typeof createTokenBuckets>;
