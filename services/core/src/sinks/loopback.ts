import { isIPv4 } from 'node:net';

/** `localhost`, `127.0.0.0/8` and `::1`: names that only ever reach this machine. */
export function isLoopbackHostname(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return name === 'localhost' || name === '::1' || (isIPv4(name) && name.startsWith('127.'));
}
