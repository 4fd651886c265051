import { describe, expect, it } from 'vitest';
import { StreamEndError, TrailingErrorGuard } from './stream-tail.ts';

const feed = (guard: TrailingErrorGuard, chunks: string[]): string => {
  let out = '';
  for (const chunk of chunks) for (const ready of guard.push(Buffer.from(chunk))) out += ready.toString();
  return out + guard.end().toString();
};

describe('TrailingErrorGuard', () => {
  it('passes a clean body through unchanged, holding back only the tail until the end', () => {
    const guard = new TrailingErrorGuard('tag123', 10);
    const passed = guard.push(Buffer.from('0123456789')).concat(guard.push(Buffer.from('abcdefghij')), guard.push(Buffer.from('KLMNO')));
    expect(Buffer.concat(passed).toString()).toBe('0123456789');
    expect(guard.end().toString()).toBe('abcdefghijKLMNO');
    expect(feed(new TrailingErrorGuard(undefined, 4), ['a,b\r\n', 'Code: 1 is a reason\r\n', 'x\r\n'])).toBe('a,b\r\nCode: 1 is a reason\r\nx\r\n');
  });

  it('fails on a tagged error block (servers from 25.11 on), without passing its text on', () => {
    const guard = new TrailingErrorGuard('kq3vx9', 64);
    const body = ['row1\r\n', 'row2\r\n', '__exception__\r\nkq3vx9\r\nCode: 241. DB::Exception: Memory limit exceeded\n52 kq3vx9\r\n__exception__\r\n'];
    let passed = '';
    for (const chunk of body) for (const ready of guard.push(Buffer.from(chunk))) passed += ready.toString();
    expect(passed).not.toContain('Exception');
    expect(() => guard.end()).toThrow(StreamEndError);
  });

  it('fails on a plain error appended by an older server', () => {
    const guard = new TrailingErrorGuard(undefined);
    guard.push(Buffer.from('row1\r\nrow2\r\n'));
    guard.push(Buffer.from('Code: 159. DB::Exception: Timeout exceeded: elapsed 5.1 seconds. (TIMEOUT_EXCEEDED) (version 24.8.4.13 (official build))\n'));
    expect(() => guard.end()).toThrow(/TIMEOUT_EXCEEDED/);
  });
});
