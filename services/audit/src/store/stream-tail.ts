/**
 * A ClickHouse server answers over HTTP with status 200 as soon as the first block is ready;
 * an error after that can only be appended to the body. This guard keeps the last
 * `holdBytes` of a raw result back until the body has ended, and then checks them for such
 * an appended error, so the error text is never passed on as data and the read fails instead.
 *
 * Two shapes are recognised:
 * - servers from 25.11 on name a random tag in the `X-ClickHouse-Exception-Tag` header and
 *   frame the error with `__exception__` and that tag; the tag cannot occur in data by chance;
 * - older servers (the compose file's 24.8) append the plain message
 *   `Code: <n>. DB::Exception: …`. A row ending in that very text would be taken for an
 *   error too: the export then fails rather than ever passing on an engine message.
 *
 * (The client's own `ResultSet.stream()` detects the tagged shape by looking for CR LF at a
 * line end, which every CSV record has; that is why exports read the raw `exec` body.)
 */
export class StreamEndError extends Error {
  override readonly name = 'StreamEndError';
}

const EXCEPTION_MARKER = '__exception__';
const PLAIN_EXCEPTION = /(?:^|\n)(Code: \d+\. DB::Exception: [^]*)$/;

export class TrailingErrorGuard {
  private readonly held: Buffer[] = [];
  private heldBytes = 0;

  constructor(
    private readonly exceptionTag: string | undefined,
    private readonly holdBytes = 256 * 1024,
  ) {}

  /** Takes the next chunk of the body; returns the chunks now safe to pass on. */
  push(chunk: Buffer): Buffer[] {
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    const ready: Buffer[] = [];
    while (this.held.length > 1 && this.heldBytes - this.held[0]!.length >= this.holdBytes) {
      const first = this.held.shift()!;
      this.heldBytes -= first.length;
      ready.push(first);
    }
    return ready;
  }

  /** The body has ended: returns what was held back, or throws if it ends in an error. */
  end(): Buffer {
    const tail = Buffer.concat(this.held);
    this.held.length = 0;
    this.heldBytes = 0;
    const text = tail.toString('latin1');
    if (this.exceptionTag && text.includes(EXCEPTION_MARKER) && text.includes(this.exceptionTag)) {
      throw new StreamEndError(`ClickHouse failed mid-stream: ${messageOf(text, this.exceptionTag)}`);
    }
    const plain = PLAIN_EXCEPTION.exec(text.length > 64 * 1024 ? text.slice(-64 * 1024) : text);
    if (plain) throw new StreamEndError(`ClickHouse failed mid-stream: ${Buffer.from(plain[1]!, 'latin1').toString('utf8').trim()}`);
    return tail;
  }
}

function messageOf(text: string, tag: string): string {
  const start = text.indexOf(EXCEPTION_MARKER);
  const block = Buffer.from(text.slice(start), 'latin1').toString('utf8');
  return block.split(EXCEPTION_MARKER).join(' ').split(tag).join(' ').replace(/\s+/g, ' ').trim();
}
