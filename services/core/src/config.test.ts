import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, readPrivateFile, resolveSecret, writePrivateFile } from './config.ts';

const modeOf = (file: string) => statSync(file).mode & 0o777;

describe.skipIf(process.platform === 'win32')('secret files under DATA_DIR', () => {
  let dir: string;
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pc-secret-')); });
  afterEach(() => { rmSync(dir, { recursive: true, force: true }); });

  it('generates the development secret once, in a file only its owner can read', () => {
    const dataDir = join(dir, 'data');
    const secret = resolveSecret({ NODE_ENV: 'development', DATA_DIR: dataDir });
    expect(secret.length).toBeGreaterThanOrEqual(32);
    expect(modeOf(join(dataDir, 'secret'))).toBe(0o600);
    expect(modeOf(dataDir)).toBe(0o700);
    expect(resolveSecret({ NODE_ENV: 'development', DATA_DIR: dataDir })).toBe(secret);
  });

  it('tightens an existing secret file that group or others can read, and keeps its secret', () => {
    const file = join(dir, 'secret');
    writeFileSync(file, 'an-existing-development-secret-of-32+chars\n');
    chmodSync(file, 0o644);
    expect(resolveSecret({ NODE_ENV: 'development', DATA_DIR: dir })).toBe('an-existing-development-secret-of-32+chars');
    expect(modeOf(file)).toBe(0o600);
  });

  it('refuses to start in production while a secret file under DATA_DIR is group- or world-readable', () => {
    const file = join(dir, 'secret');
    writeFileSync(file, 'a-leftover-development-secret-of-32+chars\n');
    const production = { NODE_ENV: 'production', DATA_DIR: dir, PORTCULLIS_SECRET: 'p'.repeat(40) };
    for (const mode of [0o644, 0o640, 0o604]) {
      chmodSync(file, mode);
      expect(() => resolveSecret(production)).toThrow(ConfigError);
      expect(() => resolveSecret(production)).toThrow(/readable by group or others.*chmod 600/);
      expect(modeOf(file)).toBe(mode); // production changes nothing on disk; the operator decides
    }
    chmodSync(file, 0o600);
    expect(resolveSecret(production)).toBe('p'.repeat(40));
    rmSync(file);
    expect(resolveSecret(production)).toBe('p'.repeat(40));
    expect(() => resolveSecret({ NODE_ENV: 'production', DATA_DIR: dir })).toThrow(/PORTCULLIS_SECRET: required/);
  });

  it('writes private files 0600, also over an existing looser file, and reads them back tightened', () => {
    const file = join(dir, 'demo-member-key');
    writePrivateFile(file, 'pcm_first\n');
    expect(modeOf(file)).toBe(0o600);
    chmodSync(file, 0o666);
    writePrivateFile(file, 'pcm_second\n');
    expect(modeOf(file)).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toBe('pcm_second\n');
    chmodSync(file, 0o644);
    expect(readPrivateFile(file)).toBe('pcm_second');
    expect(modeOf(file)).toBe(0o600);
    expect(readPrivateFile(join(dir, 'missing'))).toBeUndefined();
  });
});
