#!/usr/bin/env node
// The npm registry this project is built against serves only some platform builds of
// chdb and nx. npm then leaves those optional, other-platform packages out of
// package-lock.json, and `npm ci` refuses the lock as out of sync. This script records each
// missing optional dependency with its version and its os/cpu/libc, so npm ci skips it
// as a package for another platform instead of trying to fetch it.
// Run it after any `npm install` that rewrites package-lock.json.
import { readFileSync, writeFileSync } from 'node:fs';

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(file, 'utf8'));
const platformOf = (name) => {
  const s = name.split('/').pop();
  const os = ['darwin', 'linux', 'win32', 'freebsd', 'android', 'openbsd', 'sunos', 'aix'].find((o) => s.includes(o));
  const cpu = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 's390x', 'riscv64', 'loong64'].find((c) => new RegExp(`(^|-)${c}(-|$)`).test(s));
  const libc = s.includes('musl') ? ['musl'] : s.includes('gnu') ? ['glibc'] : undefined;
  return os && cpu ? { os: [os], cpu: [cpu], ...(libc && os === 'linux' ? { libc } : {}) } : undefined;
};

let added = 0;
for (const [path, pkg] of Object.entries(lock.packages)) {
  for (const [dep, version] of Object.entries(pkg.optionalDependencies ?? {})) {
    const base = path ? `${path}/node_modules/${dep}` : `node_modules/${dep}`;
    if (lock.packages[base] || lock.packages[`node_modules/${dep}`]) continue;
    const platform = platformOf(dep);
    if (!platform) continue;
    lock.packages[`node_modules/${dep}`] = { version, ...platform, optional: true };
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
console.log(`recorded ${added} optional platform packages`);
