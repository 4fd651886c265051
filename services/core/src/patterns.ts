import { RE2JS } from 're2js';

/**
 * Regular expressions written by agent owners (the `regex` argument rule of a policy): the one
 * way the product compiles and runs them (docs/decisions/020-linear-time-patterns.md).
 *
 * RE2 (the re2js port) never backtracks: matching takes time linear in the text, whatever the
 * pattern, so no pattern can freeze the process. The price is RE2's syntax: backreferences
 * and lookaround do not exist there, and such patterns are refused when written. Linear is
 * not free, so three bounds keep one call cheap: a pattern's compiled size, the length of the
 * text it is run on, and the work of all the patterns of one call together.
 */

/** Longest text (UTF-16 code units) a pattern is run on; a longer value is not run at all. */
export const PATTERN_TEXT_MAX = 4_096;
/** Most RE2 instructions a pattern may compile to (`[a-z]{1,100}` is about 200, `^release/` 11). */
export const PATTERN_PROGRAM_MAX = 500;
/**
 * Most work (instructions × characters of text) the patterns of one call may cost together:
 * the largest pattern over 1,024 characters, `^release/` over 4,096 characters eleven
 * times. About 50 ms at worst on a 2-vCPU VM (decision 020), microseconds usually.
 */
export const PATTERN_CALL_BUDGET = PATTERN_PROGRAM_MAX * 1_024;

/** An owner's pattern, compiled by RE2; it runs only within a `PatternRun`'s bounds. */
export class LinearPattern {
  readonly source: string;
  /** Compiled size in RE2 instructions: what each character of text costs at most. */
  readonly size: number;
  readonly #re2: RE2JS;

  private constructor(source: string, re2: RE2JS) {
    this.source = source;
    this.size = re2.programSize();
    this.#re2 = re2;
  }

  /**
   * Compiles `source` with RE2. A pattern RE2 cannot express, or that compiles to more than
   * `PATTERN_PROGRAM_MAX` instructions, is refused with a `problem` a person can act on.
   */
  static compile(source: string): PatternCompilation {
    let re2: RE2JS;
    try {
      re2 = RE2JS.compile(source);
    } catch (err) {
      const detail = err instanceof Error ? err.message.replace(/^error parsing regexp: /, '') : String(err);
      return { ok: false, problem: `must be a valid regular expression in RE2 syntax (no backreferences or lookaround): ${detail}` };
    }
    const pattern = new LinearPattern(source, re2);
    if (pattern.size > PATTERN_PROGRAM_MAX) {
      return { ok: false, problem: `is too complex: it compiles to ${pattern.size} RE2 instructions, at most ${PATTERN_PROGRAM_MAX} are allowed (large counted repetitions such as {1,500} cost the most)` };
    }
    return { ok: true, pattern };
  }

  /**
   * Whether the pattern matches somewhere in `text` (unanchored, as `RegExp.test`); undefined
   * when `run` does not let it run (text too long, or the call's budget spent).
   */
  matches(text: string, run: PatternRun): boolean | undefined {
    return run.spend(this.size, text) ? this.#re2.test(text) : undefined;
  }
}

export type PatternCompilation = { ok: true; pattern: LinearPattern } | { ok: false; problem: string };

/**
 * The budget of one call's patterns: `PATTERN_CALL_BUDGET` of work, texts of at most
 * `PATTERN_TEXT_MAX`. What is not run is the caller's to decide (the decision point fails closed).
 */
export class PatternRun {
  #left = PATTERN_CALL_BUDGET;

  /** Takes the cost of running a pattern of `size` over `text`; false, taking nothing, when it may not run. */
  spend(size: number, text: string): boolean {
    if (text.length > PATTERN_TEXT_MAX) return false;
    const cost = size * Math.max(1, text.length);
    if (cost > this.#left) return false;
    this.#left -= cost;
    return true;
  }
}
