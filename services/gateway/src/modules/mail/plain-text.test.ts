import { describe, expect, it } from 'vitest';
import { quotedForMail } from './plain-text.ts';

describe('quotedForMail', () => {
  it.each([
    ['Release bot', '"Release bot"'],
    ['Bot 2.0 (staging)', '"Bot 2.0 (staging)"'],
    ['Verify your account at https://evil.example/login', '"Verify your account at https[:]//evil[.]example/login"'],
    ['www.paypa1-secure.com/verify', '"www[.]paypa1-secure[.]com/verify"'],
    ['Call support@evil.co.uk now', '"Call support@evil[.]co[.]uk now"'],
    ['Open 203.0.113.7/pay', '"Open 203[.]0[.]113[.]7/pay"'],
    ['Acme" — click here "', '"Acme\' — click here \'"'],
    ['  many\u2028lines \t here  ', '"many lines here"'],
  ])('%j → %s', (name, quoted) => {
    expect(quotedForMail(name)).toBe(quoted);
  });

  it('bounds the length', () => {
    expect(quotedForMail('x'.repeat(300))).toBe(`"${'x'.repeat(99)}…"`);
  });
});
